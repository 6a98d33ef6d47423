// Runtime ISA selection for the built-in kernels.
//
// The package is compiled for the baseline x86-64 ISA; wider paths are compiled per function
// (see simd.h) and chosen here once per process from what the CPU and OS support. The
// environment variable SK_ISA=scalar|avx2|avx512 lowers the choice (never above what the CPU
// supports), so the scalar fallback can be exercised on any machine:
//
//   SK_ISA=scalar ./my_program
//
// Kernels must give identical bits for identical inputs at one ISA level; results may differ
// between levels (different exp approximations, reduction widths).
#ifndef SUPERKERNEL_KERNELS_CPU_ISA_H_
#define SUPERKERNEL_KERNELS_CPU_ISA_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>

namespace sk::kernels {

enum IsaLevel : int { kIsaScalar = 0, kIsaAvx2 = 1, kIsaAvx512 = 2 };

// Highest level the CPU and OS support (AVX2 needs FMA too; AVX-512 means F+BW+VL).
int detected_isa_level();
// detected_isa_level() capped by SK_ISA, read once.
int default_isa_level();
// The level kernels use now: default_isa_level() unless a test forced another one.
int current_isa_level();
// Forces `level` (capped at detected_isa_level()); a negative level restores the default.
// Returns the level in effect afterwards.
int force_isa_level(int level);
// "scalar", "avx2", "avx512", or "unknown".
const char* isa_level_name(int level);

}  // namespace sk::kernels

extern "C" {
// Internal (hidden) C spellings of current_isa_level() and its name.
int sk_kernels_isa_level(void);
const char* sk_kernels_isa_name(void);
// Exported for tests only: force_isa_level() reachable through dlsym.
SK_EXPORT int32_t sk_kernels_builtin_force_isa(int32_t level);
}

#endif  // SUPERKERNEL_KERNELS_CPU_ISA_H_
