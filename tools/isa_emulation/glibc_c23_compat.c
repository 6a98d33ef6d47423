/* The bochscpu-python wheel is linked against glibc 2.38, whose C23 headers redirect strtoull and
 * sscanf to __isoc23_* entry points. On an older glibc (Debian 12 has 2.36) preloading this
 * library supplies them; the C23 changes (binary "0b" prefixes) do not matter to the emulator. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

unsigned long long __isoc23_strtoull(const char* s, char** end, int base);
int __isoc23_sscanf(const char* s, const char* format, ...);

unsigned long long __isoc23_strtoull(const char* s, char** end, int base) { return strtoull(s, end, base); }

int __isoc23_sscanf(const char* s, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsscanf(s, format, ap);
  va_end(ap);
  return n;
}
