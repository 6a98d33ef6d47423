// Pass: graph_program. The plain graph-mode program: every kernel op runs on its cores, then a
// full barrier of all cores; host ops end the current launch and run on the calling thread.
// Cores that do not run an op still join the op's internal sync_all calls, so kernels using
// sync_all work at any core count.
#ifndef SUPERKERNEL_COMPILER_GRAPH_PROGRAM_H_
#define SUPERKERNEL_COMPILER_GRAPH_PROGRAM_H_

#include "compiler/compile_context.h"

namespace sk {

Status build_graph_program(CompileContext& ctx);

// Appends kernel ops to graph-mode launches (op, full barrier, op, ...). A host step or a
// segment launch in between closes the open launch.
class GraphLaunchBuilder {
 public:
  GraphLaunchBuilder(Program& program, int32_t num_cores) : program_(program), num_cores_(num_cores) {}
  void add(const PlanOp& op, int32_t op_index);
  void close() { open_ = -1; }

 private:
  Program& program_;
  int32_t num_cores_;
  int32_t open_ = -1;
};

// Appends `op`'s PROLOGUE/RUN to its cores and the feed barriers of its sync_all calls to the
// other cores of `launch`.
void emit_op_on_all_cores(Launch& launch, const PlanOp& op, int32_t op_index);
// A launch over cores [0, n) with barrier group 0 = all of them.
Launch make_launch(std::string label, int32_t num_cores);
// Labels "name (kernel)" for printing.
std::vector<std::string> op_labels(const Plan& plan);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_GRAPH_PROGRAM_H_
