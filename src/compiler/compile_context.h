// State threaded through the compiler passes (see pipeline.cc for their order).
#ifndef SUPERKERNEL_COMPILER_COMPILE_CONTEXT_H_
#define SUPERKERNEL_COMPILER_COMPILE_CONTEXT_H_

#include <memory>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "compiler/scope_options.h"
#include "packages/kernel_registry.h"
#include "program/plan.h"
#include "program/program.h"
#include "superkernel/compile.h"
#include "superkernel/graph.h"
#include "superkernel/options.h"

namespace sk {

// An ordering edge from an event: `consumer` runs after `producer` (the last op its stream ran
// before recording `event`), because the consumer's stream waited for the event first.
struct EventDep {
  int32_t consumer = 0;  // plan op indices
  int32_t producer = 0;
  int32_t event = 0;
};

// The cores one stream of a stream-fused segment runs on: [first_core, first_core + num_cores).
struct StreamPartition {
  int32_t stream = 0;
  int32_t first_core = 0;
  int32_t num_cores = 1;
  int32_t core_limit = 0;  // the stream's LimitCoreNum, 0 when it has none
};

// A fusion segment: consecutive fusible kernel ops that run as one launch.
struct Segment {
  int32_t id = 0;
  std::vector<int32_t> ops;                         // plan op indices, execution order
  std::vector<int32_t> scopes;                      // the scope stack of the first op (empty: whole-graph fusion)
  std::vector<std::vector<int32_t>> joined_scopes;  // every scope stack of the ops (stream fusion joins several)
  std::string scope_label;                          // "outer/inner", or "<graph>"; joined ones with " + "
  ScopeOptions options;                             // merged, innermost scope first (of the first scope)
  std::vector<int32_t> streams;                     // in order of first appearance
  std::vector<EventDep> event_deps;                 // cross-stream event orderings inside the segment
  std::vector<StreamPartition> partitions;          // set when the segment spans several streams
  CutReason cut = CutReason::kGraphEnd;
  int32_t cut_op = -1;  // plan op that ended the segment
  std::string cut_detail;
  std::vector<std::string> recompute;  // the recompute pass's decisions, for explain
};

struct CompileContext {
  const Graph& graph;
  const CompileOptions& options;
  const KernelRegistry& registry;
  CoreLayout layout;

  CompileContext(const Graph& g, const CompileOptions& o, const KernelRegistry& r, CoreLayout l)
      : graph(g), options(o), registry(r), layout(l) {}

  std::unique_ptr<Plan> plan;
  std::vector<Segment> segments;      // superkernel mode
  std::vector<int32_t> op_segment;    // per plan op: segment id, or -1 when it runs unfused
  std::vector<CutReason> op_unfused;  // per plan op outside segments: why
  // Set by recompute when it added plan ops: the execution order of every plan op, and per plan
  // op the op through which its inputs stay live (see MemoryPlanOptions).
  std::vector<int32_t> op_order;
  std::vector<int32_t> inputs_live_until;
  Program program;
  CompileReport report;
};

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_COMPILE_CONTEXT_H_
