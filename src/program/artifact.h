// What the compiler hands to a backend: the plan (flat per-op descriptors, the memory plan and
// the arena) and the per-core Program, plus the report. It is the whole contract between
// src/compiler and the backends in src/runtime: a backend needs nothing else from the compiler.
//
//   auto art = compile_graph(graph, options, registry, CoreLayout{2, 0});
//   if (!art) return art.status();
//   run the launches of art->program over art->plan->ops ...
#ifndef SUPERKERNEL_PROGRAM_ARTIFACT_H_
#define SUPERKERNEL_PROGRAM_ARTIFACT_H_

#include <memory>

#include "program/plan.h"
#include "program/program.h"
#include "superkernel/compile.h"
#include "superkernel/options.h"

namespace sk {

struct CompiledArtifact {
  ExecutionMode mode = ExecutionMode::kGraph;
  std::unique_ptr<Plan> plan;
  Program program;  // empty in eager mode, which runs the plan's ops one by one
  CompileReport report;
};

}  // namespace sk

#endif  // SUPERKERNEL_PROGRAM_ARTIFACT_H_
