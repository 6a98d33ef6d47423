// Runtime ISA selection for the built-in kernels.
//
// The package is compiled for the baseline x86-64 ISA; wider paths are compiled per function
// (see simd.h) and chosen here once per process from what the CPU and OS support. The levels are
// nested, each one the previous plus some instructions:
//
//   scalar       baseline x86-64
//   avx2         + AVX2, FMA, F16C
//   avx512       + AVX-512 F/BW/VL
//   avx512_vnni  + AVX512_VNNI (VPDPBUSD: the int8 matmuls)
//   avx512_bf16  + AVX512_BF16 (VDPBF16PS: matmul.bf16 rounds x to bf16)
//   amx          + AMX-TILE, AMX-BF16, AMX-INT8, with the tile state enabled by the OS and granted
//                  to the process (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, asked once here):
//                  matmul.bf16 (and the grouped matmul's bf16 experts) on AMX tiles
//
// The environment variable SK_ISA (one of those names) lowers the choice, never above what the
// CPU supports, so that one machine can run every path it has:
//
//   SK_ISA=avx512 ./my_program   # AVX-512 without the VNNI and BF16 dot products
//
// Kernels give identical bits for identical inputs at one level, on any CPU that has it; results
// may differ between levels (different exp approximations, reduction widths, rounding of x).
#ifndef SUPERKERNEL_KERNELS_CPU_ISA_H_
#define SUPERKERNEL_KERNELS_CPU_ISA_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>

namespace sk::kernels {

enum IsaLevel : int {
  kIsaScalar = 0,
  kIsaAvx2 = 1,
  kIsaAvx512 = 2,
  kIsaAvx512Vnni = 3,
  kIsaAvx512Bf16 = 4,
  kIsaAmx = 5,
  kIsaMaxLevel = kIsaAmx,
};

// Highest level the CPU and OS support.
int detected_isa_level();
// detected_isa_level() capped by SK_ISA, read once.
int default_isa_level();
// The level in effect: default_isa_level() unless a test forced another one.
int selected_isa_level();
// The register width of the selected level: kIsaScalar, kIsaAvx2 or kIsaAvx512. The levels above
// kIsaAvx512 add instructions, not width, so kernels without VNNI or BF16 code switch on this.
int current_isa_level();
// Forces `level` (capped at detected_isa_level()); a negative level restores the default.
// Returns the level in effect afterwards.
int force_isa_level(int level);
// "scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx", or "unknown".
const char* isa_level_name(int level);

}  // namespace sk::kernels

extern "C" {
// Internal (hidden) C spellings of selected_isa_level() and its name.
int sk_kernels_isa_level(void);
const char* sk_kernels_isa_name(void);
// Exported for tests only: force_isa_level() reachable through dlsym.
SK_EXPORT int32_t sk_kernels_builtin_force_isa(int32_t level);
}

#endif  // SUPERKERNEL_KERNELS_CPU_ISA_H_
