// Building blocks of Programs, shared by the compiler's program builders and by eager mode, which
// launches one op at a time:
//
//   Launch launch = make_launch("eager op 'x'", 2);
//   emit_op_on_all_cores(launch, plan.ops[3], 3);  // PROLOGUE/RUN on its cores, feeds elsewhere
#ifndef SUPERKERNEL_PROGRAM_EMIT_H_
#define SUPERKERNEL_PROGRAM_EMIT_H_

#include <string>
#include <vector>

#include "program/plan.h"
#include "program/program.h"

namespace sk {

// A launch over cores [0, n) with barrier group 0 = all of them.
Launch make_launch(std::string label, int32_t num_cores);
// Appends `op`'s PROLOGUE/RUN to its cores and the feed barriers of its sync_all calls to the
// other cores of `launch`. A tiling-sink op first gets its TILING on its first core and a barrier.
void emit_op_on_all_cores(Launch& launch, const PlanOp& op, int32_t op_index);
// Labels "name (kernel)" for printing.
std::vector<std::string> op_labels(const Plan& plan);

}  // namespace sk

#endif  // SUPERKERNEL_PROGRAM_EMIT_H_
