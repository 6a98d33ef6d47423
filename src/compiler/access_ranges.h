// The access callback of a kernel op, called the way the ABI prescribes (count first when the
// buffer is too small) and checked. Used by the passes that reason about which bytes each core
// reads and writes (in_place, schedule).
//
//   std::vector<sk_access_range> ranges;
//   SK_RETURN_IF_ERROR(query_access_ranges(op, core, num_cores, ranges));
#ifndef SUPERKERNEL_COMPILER_ACCESS_RANGES_H_
#define SUPERKERNEL_COMPILER_ACCESS_RANGES_H_

#include <vector>

#include "program/plan.h"

namespace sk {

// Fills `ranges` with what core `local` of `n` touches in `op` (whose kernel has an access
// callback). A failing callback or a range with a bad operand, order or mode is a kernel error
// naming the op and kernel.
Status query_access_ranges(const PlanOp& op, int32_t local, int32_t n, std::vector<sk_access_range>& ranges);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_ACCESS_RANGES_H_
