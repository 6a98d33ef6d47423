// Pass: graph_program. The plain graph-mode program: every kernel op runs on its cores, then a
// full barrier of all cores; host ops end the current launch and run on the calling thread.
// Cores that do not run an op still join the op's internal sync_all calls, so kernels using
// sync_all work at any core count.
#ifndef SUPERKERNEL_COMPILER_GRAPH_PROGRAM_H_
#define SUPERKERNEL_COMPILER_GRAPH_PROGRAM_H_

#include "compiler/compile_context.h"
#include "program/emit.h"

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

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_GRAPH_PROGRAM_H_
