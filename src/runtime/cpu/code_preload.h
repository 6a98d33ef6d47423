// Code preload: which bytes of a kernel's code a PRELOAD instruction warms, and how. Code is
// touched in 2 KiB-aligned chunks (the unit of the original's instruction-cache preload), every
// 64-byte line of a chunk with a prefetch to L2 (x86 has no instruction-cache prefetch on the
// CPUs this targets; L2 feeds the instruction cache). Prefetches never fault, so a chunk may
// reach past the end of the mapping.
//   per-func: the chunks holding the first kPerFuncPreloadBytes of the entry point.
//   max:      the chunks holding the whole entry symbol (its ELF size), at most
//             kMaxPreloadBytes; per-func's bytes when the size is unknown.
#ifndef SUPERKERNEL_RUNTIME_CPU_CODE_PRELOAD_H_
#define SUPERKERNEL_RUNTIME_CPU_CODE_PRELOAD_H_

#include <cstddef>
#include <cstdint>

#include "program/plan.h"

namespace sk::cpu {

inline constexpr uintptr_t kPreloadChunk = 2048;
inline constexpr size_t kCacheLine = 64;
inline constexpr uint64_t kPerFuncPreloadBytes = 2048;
inline constexpr uint64_t kMaxPreloadBytes = 16 * 1024;

struct CodeSpan {
  const uint8_t* begin = nullptr;  // chunk-aligned
  const uint8_t* end = nullptr;    // chunk-aligned, exclusive
};

// The span PRELOAD `op` with `mode` (a PreloadCode value) warms on core `core` (the core's
// replica of the kernel when it is replicated).
CodeSpan preload_span(const PlanOp& op, int32_t mode, int core);

inline void prefetch_code_line(const uint8_t* p) { __builtin_prefetch(p, 0, 2); }

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_CODE_PRELOAD_H_
