// The compiler's entry point: a graph, the options and the loaded kernel packages in, a compiled
// artifact out. It runs no kernel (tiling and access callbacks aside) and knows no backend; the
// device's core layout is all it needs to know about the machine.
//
//   auto art = sk::compile_graph(graph, options, registry, sk::CoreLayout{4, 0});
//   if (!art) return art.status();
//   std::string text = sk::explain_text(graph, options, art->report);
#ifndef SUPERKERNEL_COMPILER_COMPILER_H_
#define SUPERKERNEL_COMPILER_COMPILER_H_

#include <string>

#include "packages/kernel_registry.h"
#include "program/artifact.h"
#include "superkernel/graph.h"
#include "superkernel/options.h"

namespace sk {

// The device's core layout as the compiler sees it.
struct CoreLayout {
  int num_cores = 1;
  int cube_cores = 0;  // 0: no split, every core serves both kinds
};

// Runs the pipeline of passes for options.mode() (src/compiler/pipeline.cc).
Expected<CompiledArtifact> compile_graph(const Graph& graph, const CompileOptions& options,
                                         const KernelRegistry& registry, CoreLayout layout);

// The text `sk::explain` returns for a compiled graph.
std::string explain_text(const Graph& graph, const CompileOptions& options, const CompileReport& report);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_COMPILER_H_
