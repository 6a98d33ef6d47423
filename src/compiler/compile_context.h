// State threaded through the compiler passes (see pipeline.cc for their order).
#ifndef SUPERKERNEL_COMPILER_COMPILE_CONTEXT_H_
#define SUPERKERNEL_COMPILER_COMPILE_CONTEXT_H_

#include <memory>
#include <string>
#include <vector>

#include "program/program.h"
#include "runtime/kernel_registry.h"
#include "runtime/plan.h"
#include "superkernel/compile.h"
#include "superkernel/graph.h"
#include "superkernel/options.h"

namespace sk {

// The device's core layout as the compiler sees it.
struct CoreLayout {
  int num_cores = 1;
  int cube_cores = 0;  // 0: no split, every core serves both kinds
};

struct CompileContext {
  const Graph& graph;
  const CompileOptions& options;
  const KernelRegistry& registry;
  CoreLayout layout;

  std::unique_ptr<Plan> plan;
  Program program;
  CompileReport report;
};

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_COMPILE_CONTEXT_H_
