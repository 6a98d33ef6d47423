// The access callback of a kernel op, called the way the ABI prescribes (count first when the
// buffer is too small) and checked, and the absolute byte ranges a core of an op touches. Used by
// the passes that reason about which bytes each core reads and writes (in_place, recompute,
// schedule).
//
//   std::vector<sk_access_range> ranges;
//   SK_RETURN_IF_ERROR(query_access_ranges(op, core, num_cores, ranges));
//   CoreAccess acc;
//   SK_RETURN_IF_ERROR(collect_core_access(op, core, num_cores, acc));  // addresses
#ifndef SUPERKERNEL_COMPILER_ACCESS_RANGES_H_
#define SUPERKERNEL_COMPILER_ACCESS_RANGES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "program/plan.h"

namespace sk {

// Fills `ranges` with what core `local` of `n` touches in `op` (whose kernel has an access
// callback). A failing callback or a range with a bad operand, order or mode is a kernel error
// naming the op and kernel.
Status query_access_ranges(const PlanOp& op, int32_t local, int32_t n, std::vector<sk_access_range>& ranges);

// [begin, end) byte addresses.
using ByteRange = std::pair<uint64_t, uint64_t>;

struct CoreAccess {
  std::vector<ByteRange> reads;
  std::vector<ByteRange> writes;
};

// Bytes a strided operand can touch: from its lowest to its highest element.
ByteRange operand_extent(const sk_tensor_arg& t);

// The addresses core `local` of `n` reads and writes in kernel op `op` (its pointers resolved):
// its access callback's ranges (every operand whole without one), a tiling sink's tiling buffer,
// and the workspace (a per-core one only in this core's slice).
Status collect_core_access(const PlanOp& op, int32_t local, int32_t n, CoreAccess& out);

// What core `local` of an op's PROLOGUE touches: no input and no output (kernel_abi.h), but its
// workspace (a per-core one only in this core's slice) and a tiling sink's tiling buffer.
void collect_prologue_access(const PlanOp& op, int32_t local, CoreAccess& out);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_ACCESS_RANGES_H_
