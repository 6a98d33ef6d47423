#include "kernels/cpu_isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sk::kernels {
namespace {

// AMX-TILE, AMX-BF16 and AMX-INT8 (CPUID.(7,0):EDX bits 24, 22, 25), the tile state enabled in
// XCR0 (bits 17 and 18), and the tile data granted to this process: Linux keeps the 8 KiB state
// off until a process asks (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without the grant the
// first tile instruction is fatal.
bool amx_usable() {
#if defined(__linux__) && defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kAmx = (1u << 22) | (1u << 24) | (1u << 25);
  if ((edx & kAmx) != kAmx) return false;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);
  if ((lo & kTileState) != kTileState) return false;
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

int probe_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc checks XCR0 as well, so these also say whether the OS saves YMM/ZMM state.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return kIsaScalar;
  // F16C (VCVTPH2PS: matmul.f16) is CPUID.1:ECX bit 29; every AVX2 CPU has it, but say so.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 29)) == 0) return kIsaScalar;
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl")) {
    return kIsaAvx2;
  }
  if (!__builtin_cpu_supports("avx512vnni")) return kIsaAvx512;
  // Every CPU with AVX512_BF16 has AVX512_VNNI too; one without it would stop at avx512 above.
  if (!__builtin_cpu_supports("avx512bf16")) return kIsaAvx512Vnni;
  if (!amx_usable()) return kIsaAvx512Bf16;
  return kIsaAmx;
#else
  return kIsaScalar;
#endif
}

int parse_env_level(int detected) {
  const char* value = std::getenv("SK_ISA");
  if (value == nullptr || *value == '\0') return detected;
  int wanted = -1;
  for (int level = kIsaScalar; level <= kIsaMaxLevel; ++level) {
    if (std::strcmp(value, isa_level_name(level)) == 0) wanted = level;
  }
  // Kernels have nowhere to report a typo, and ignoring it only means the fastest path runs.
  if (wanted < 0) return detected;
  return std::min(wanted, detected);
}

// -1 while not forced. Relaxed is enough: the value is self-contained (nothing is published
// with it) and forcing is a test-only facility used while no kernel runs.
std::atomic<int> g_forced_level{-1};

}  // namespace

int detected_isa_level() {
  static const int level = probe_cpu();
  return level;
}

int default_isa_level() {
  static const int level = parse_env_level(detected_isa_level());
  return level;
}

int selected_isa_level() {
  const int forced = g_forced_level.load(std::memory_order_relaxed);
  return forced >= 0 ? forced : default_isa_level();
}

int current_isa_level() { return std::min<int>(selected_isa_level(), kIsaAvx512); }

int force_isa_level(int level) {
  g_forced_level.store(level < 0 ? -1 : std::min(level, detected_isa_level()), std::memory_order_relaxed);
  return selected_isa_level();
}

const char* isa_level_name(int level) {
  switch (level) {
    case kIsaScalar:
      return "scalar";
    case kIsaAvx2:
      return "avx2";
    case kIsaAvx512:
      return "avx512";
    case kIsaAvx512Vnni:
      return "avx512_vnni";
    case kIsaAvx512Bf16:
      return "avx512_bf16";
    case kIsaAmx:
      return "amx";
    default:
      return "unknown";
  }
}

}  // namespace sk::kernels

extern "C" {

int sk_kernels_isa_level(void) { return sk::kernels::selected_isa_level(); }

const char* sk_kernels_isa_name(void) { return sk::kernels::isa_level_name(sk::kernels::selected_isa_level()); }

SK_EXPORT int32_t sk_kernels_builtin_force_isa(int32_t level) { return sk::kernels::force_isa_level(level); }

}  // extern "C"
