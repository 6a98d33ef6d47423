#include "runtime/cpu/code_preload.h"

#include <algorithm>

#include "runtime/cpu/launch_state.h"

namespace sk::cpu {

CodeSpan preload_span(const PlanOp& op, int32_t mode, int core) {
  const auto entry = reinterpret_cast<uintptr_t>(kernel_for_core(op, core)->run);
  uint64_t bytes = kPerFuncPreloadBytes;
  if (mode == static_cast<int32_t>(PreloadCode::kMax) && op.kernel->run_code_bytes > 0)
    bytes = std::min(op.kernel->run_code_bytes, kMaxPreloadBytes);
  const uintptr_t begin = entry & ~(kPreloadChunk - 1);
  const uintptr_t end = (entry + bytes + kPreloadChunk - 1) & ~(kPreloadChunk - 1);
  return {reinterpret_cast<const uint8_t*>(begin), reinterpret_cast<const uint8_t*>(end)};
}

}  // namespace sk::cpu
