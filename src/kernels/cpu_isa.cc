#include "kernels/cpu_isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace sk::kernels {
namespace {

int probe_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc checks XCR0 as well, so these also say whether the OS saves YMM/ZMM state.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return kIsaScalar;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    return kIsaAvx512;
  }
  return kIsaAvx2;
#else
  return kIsaScalar;
#endif
}

int parse_env_level(int detected) {
  const char* value = std::getenv("SK_ISA");
  if (value == nullptr || *value == '\0') return detected;
  int wanted = -1;
  if (std::strcmp(value, "scalar") == 0) wanted = kIsaScalar;
  if (std::strcmp(value, "avx2") == 0) wanted = kIsaAvx2;
  if (std::strcmp(value, "avx512") == 0) wanted = kIsaAvx512;
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

int current_isa_level() {
  const int forced = g_forced_level.load(std::memory_order_relaxed);
  return forced >= 0 ? forced : default_isa_level();
}

int force_isa_level(int level) {
  g_forced_level.store(level < 0 ? -1 : std::min(level, detected_isa_level()), std::memory_order_relaxed);
  return current_isa_level();
}

const char* isa_level_name(int level) {
  switch (level) {
    case kIsaScalar:
      return "scalar";
    case kIsaAvx2:
      return "avx2";
    case kIsaAvx512:
      return "avx512";
    default:
      return "unknown";
  }
}

}  // namespace sk::kernels

extern "C" {

int sk_kernels_isa_level(void) { return sk::kernels::current_isa_level(); }

const char* sk_kernels_isa_name(void) { return sk::kernels::isa_level_name(sk::kernels::current_isa_level()); }

SK_EXPORT int32_t sk_kernels_builtin_force_isa(int32_t level) { return sk::kernels::force_isa_level(level); }

}  // extern "C"
