// The compiler pipeline: named passes run in order, each timed. The order is the data flow of
// DESIGN.md §3: verify -> build_plan -> assign_cores -> memory_plan -> allocate -> in_place ->
// program. What it returns is a CompiledArtifact (program/artifact.h); it runs nothing.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include <unistd.h>

#include "compiler/assign_cores.h"
#include "compiler/build_plan.h"
#include "compiler/code_layout.h"
#include "compiler/compile_context.h"
#include "compiler/compiler.h"
#include "compiler/graph_program.h"
#include "compiler/in_place.h"
#include "compiler/memory_plan.h"
#include "compiler/partition_streams.h"
#include "compiler/recompute.h"
#include "compiler/replicate_kernels.h"
#include "compiler/schedule.h"
#include "compiler/scope_options.h"
#include "compiler/segment.h"
#include "superkernel/attrs_core.h"

namespace sk {

const char* cut_reason_name(CutReason reason) {
  switch (reason) {
    case CutReason::kGraphEnd:
      return "GRAPH_END";
    case CutReason::kOpUnsupported:
      return "OP_UNSUPPORTED";
    case CutReason::kHostOp:
      return "HOST_OP";
    case CutReason::kScopeBoundary:
      return "SCOPE_BOUNDARY";
    case CutReason::kNotFused:
      return "NOT_FUSED";
    case CutReason::kStreamLimit:
      return "STREAM_LIMIT";
    case CutReason::kScopeBypassed:
      return "SCOPE_BYPASSED";
    case CutReason::kSplitMode:
      return "SPLIT_MODE";
    case CutReason::kTilingSink:
      return "TILING_SINK";
    case CutReason::kCommunication:
      return "COMMUNICATION";
  }
  return "?";
}

namespace {

struct Pass {
  const char* name;
  std::function<Status(CompileContext&)> run;
  std::function<std::string(const CompileContext&)> describe;  // for print_after
};

Status verify_pass(CompileContext& ctx) {
  SK_RETURN_IF_ERROR(ctx.options.validate());
  SK_RETURN_IF_ERROR(ctx.graph.verify());
  // Scope options are parsed here in every mode, although only superkernel mode acts on them, so
  // that a malformed option string is the same error whatever the mode (segment re-parses them
  // and keeps the warnings).
  std::vector<std::string> ignored_warnings;
  for (size_t id = 1; id < ctx.graph.num_scopes(); ++id) {
    const ScopeInfo& scope = ctx.graph.scope(static_cast<int32_t>(id));
    auto parsed = parse_scope_options(scope.name, scope.options, &ignored_warnings);
    if (!parsed) return parsed.status();
  }
  return Status::ok();
}

// Most bytes the arena may take, and how to name that limit in an error.
std::pair<int64_t, std::string> arena_limit(const CompileOptions& options) {
  if (options.arena_limit_bytes > 0)
    return {options.arena_limit_bytes, "option arena_limit_bytes = " + std::to_string(options.arena_limit_bytes)};
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return {INT64_MAX, "the int64 byte range"};
  const int64_t physical = static_cast<int64_t>(pages) * page_bytes;
  return {physical, "the machine's physical memory of " + std::to_string(physical) +
                        " bytes (the default of option arena_limit_bytes)"};
}

Status memory_plan_pass(CompileContext& ctx) {
  Plan& plan = *ctx.plan;
  const auto [limit, limit_name] = arena_limit(ctx.options);
  // Every buffer fits the limit on its own and their sum fits int64_t, so the planner's offset
  // arithmetic cannot overflow (tensor sizes were bounded by verify).
  uint64_t total = 0;
  bool overflow = false;
  for (const TensorInfo& t : plan.tensors)
    if (t.kind != TensorKind::kView && t.kind != TensorKind::kConstant)
      overflow |= __builtin_add_overflow(total, static_cast<uint64_t>(t.storage_bytes) + 64, &total);
  for (const PlanOp& op : plan.ops) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(op.workspace_bytes, op.workspace_per_core() ? op.cores.size() : 1, &bytes) ||
        bytes > static_cast<uint64_t>(limit))
      return Status::invalid_argument("op '" + op.name + "': kernel '" + op.kernel_name + "' asks for a workspace of " +
                                      std::to_string(op.workspace_bytes) + " bytes" +
                                      (op.workspace_per_core() ? " per core" : "") + ", more than " + limit_name);
    overflow |= __builtin_add_overflow(total, bytes + 64, &total);
  }
  if (overflow || total > static_cast<uint64_t>(INT64_MAX / 2))
    return Status::invalid_argument("graph '" + ctx.graph.name() + "': its buffers need more than " +
                                    std::to_string(INT64_MAX / 2) + " bytes in total, more than " + limit_name);
  MemoryPlanOptions mp;
  // Eager mode allocates every tensor on its own; the data dump needs every output intact until
  // it is copied at the end of its launch.
  mp.reuse = ctx.options.mode() != ExecutionMode::kEager && !ctx.options.dump;
  if (ctx.options.mode() == ExecutionMode::kSuperKernel && ctx.graph.num_streams() > 1)
    for (const PlanOp& op : plan.ops) mp.op_stream.push_back(ctx.graph.op(op.graph_op).stream);
  mp.order = ctx.op_order;
  mp.inputs_live_until = ctx.inputs_live_until;
  plan_memory(plan, mp);
  const std::string arena = "an arena of " + std::to_string(plan.memory.arena_bytes) +
                            " bytes (inputs, outputs, intermediates and workspaces, as planned for " +
                            execution_mode_name(ctx.options.mode()) + " mode)";
  // The variables count too: bound to caller memory or not, the executable needs their bytes.
  // (Both sums are below INT64_MAX / 2, checked above.)
  const MemoryPlan& m = plan.memory;
  if (m.variable_bytes == 0 && m.arena_bytes > limit)
    return Status::invalid_argument("graph '" + ctx.graph.name() + "' needs " + arena + ", more than " + limit_name);
  if (m.arena_bytes + m.variable_bytes > limit)
    return Status::invalid_argument(
        "graph '" + ctx.graph.name() + "' needs " + std::to_string(m.arena_bytes + m.variable_bytes) +
        " bytes: " + arena + " and variables of " + std::to_string(m.variable_bytes) +
        " bytes (storage of their own until bound to caller memory), more than " + limit_name);
  return Status::ok();
}

Status allocate_pass(CompileContext& ctx) {
  Plan& plan = *ctx.plan;
  auto arena = AlignedBuffer::allocate(static_cast<size_t>(plan.memory.arena_bytes), "the arena");
  if (!arena) return arena.status();
  plan.arena = std::move(*arena);
  SK_RETURN_IF_ERROR(plan.allocate_variables());
  plan.resolve_pointers();
  return Status::ok();
}

// What a pass leaves behind, as text, for print_after.
std::string describe_plan(const CompileContext& ctx) {
  std::string out;
  for (const PlanOp& op : ctx.plan->ops) {
    out += "  " + op.name + " (" + (op.kernel ? op.kernel_name : std::string(op_kind_name(op.kind))) + ")";
    if (!op.cores.empty()) {
      out += " cores";
      for (int32_t c : op.cores) out += " " + std::to_string(c);
    }
    if (op.workspace_offset >= 0) out += " workspace@" + std::to_string(op.workspace_offset);
    out += "\n";
  }
  return out;
}

std::string describe_memory(const CompileContext& ctx) {
  std::string out = "  arena " + std::to_string(ctx.plan->memory.arena_bytes) + " bytes, peak live " +
                    std::to_string(ctx.plan->memory.peak_live_bytes) + ", variables " +
                    std::to_string(ctx.plan->memory.variable_bytes) + " bytes outside the arena\n";
  for (size_t i = 0; i < ctx.plan->tensors.size(); ++i) {
    const TensorInfo& t = ctx.plan->tensors[i];
    if (ctx.plan->memory.offset[i] < 0) continue;
    out += "  " + t.name + " @" + std::to_string(ctx.plan->memory.offset[i]) + " " + std::to_string(t.storage_bytes) +
           " bytes\n";
  }
  return out;
}

std::string describe_segments(const CompileContext& ctx) {
  std::string out;
  for (const Segment& s : ctx.segments) {
    out += "  segment " + std::to_string(s.id) + " scope '" + s.scope_label + "' ops";
    for (int32_t op : s.ops) out += " " + ctx.plan->ops[op].name;
    out += " | cut " + std::string(cut_reason_name(s.cut));
    for (const StreamPartition& p : s.partitions)
      out += " | stream '" + ctx.graph.stream_name(p.stream) + "' cores " + std::to_string(p.first_core) + "-" +
             std::to_string(p.first_core + p.num_cores - 1);
    out += "\n";
  }
  return out;
}

// recompute adds plan ops and tensors; the memory plan and the arena are then redone over the new
// execution order, so that explain's memory figures stay those of the plan that runs.
Status recompute_pass(CompileContext& ctx) {
  SK_RETURN_IF_ERROR(recompute_ops(ctx));
  if (ctx.op_order.empty()) return Status::ok();
  SK_RETURN_IF_ERROR(memory_plan_pass(ctx));
  return allocate_pass(ctx);
}

std::string describe_recompute(const CompileContext& ctx) {
  std::string out;
  for (const Segment& s : ctx.segments)
    for (const std::string& line : s.recompute) out += "  segment " + std::to_string(s.id) + ": " + line + "\n";
  return out + describe_plan(ctx) + describe_memory(ctx);
}

std::vector<Pass> pipeline(ExecutionMode mode) {
  std::vector<Pass> passes = {
      {"verify", verify_pass,
       [](const CompileContext& c) { return "  " + std::to_string(c.graph.num_ops()) + " ops ok\n"; }},
      {"build_plan", build_plan, describe_plan},
      {"replicate_kernels", replicate_kernels, describe_plan},
      {"assign_cores", assign_cores, describe_plan},
      {"memory_plan", memory_plan_pass, describe_memory},
      {"allocate", allocate_pass, describe_memory},
      {"in_place", check_in_place, describe_in_place},
  };
  auto program_text = [](const CompileContext& c) { return print_program(c.program); };
  if (mode == ExecutionMode::kGraph) passes.push_back({"graph_program", build_graph_program, program_text});
  if (mode == ExecutionMode::kSuperKernel) {
    passes.push_back({"segment", segment_graph, describe_segments});
    passes.push_back({"partition_streams", partition_streams, describe_segments});
    passes.push_back({"recompute", recompute_pass, describe_recompute});
    passes.push_back({"schedule", schedule_segments, program_text});
    passes.push_back({"code_layout", layout_code, program_text});
  }
  return passes;
}

}  // namespace

Expected<CompiledArtifact> compile_graph(const Graph& graph, const CompileOptions& options,
                                         const KernelRegistry& registry, CoreLayout layout) {
  CompileContext ctx{graph, options, registry, layout};
  std::string timings, printed;
  const std::vector<Pass> passes = pipeline(options.mode());
  if (!options.print_after.empty() && options.print_after != "all" &&
      std::none_of(passes.begin(), passes.end(), [&](const Pass& p) { return options.print_after == p.name; })) {
    std::string names;
    for (const Pass& p : passes) names += (names.empty() ? "" : ", ") + std::string(p.name);
    return Status::invalid_argument("option 'print_after': no pass named '" + options.print_after + "' in " +
                                    execution_mode_name(options.mode()) + " mode (passes: " + names + ", or all)");
  }
  for (const Pass& pass : passes) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = pass.run(ctx);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s %.3f ms", timings.empty() ? "" : ", ", pass.name, ms);
    timings += buf;
    if (!s) return s.with_context("compiling graph '" + graph.name() + "' (pass " + pass.name + ")");
    if (options.print_after == "all" || options.print_after == pass.name)
      printed += "-- after " + std::string(pass.name) + " --\n" + pass.describe(ctx);
  }
  for (const Segment& seg : ctx.segments)
    for (SegmentReport& r : ctx.report.segments)
      if (r.id == seg.id) r.recompute = seg.recompute;
  CompiledArtifact art;
  art.mode = options.mode();
  art.plan = std::move(ctx.plan);
  art.program = std::move(ctx.program);
  art.report = std::move(ctx.report);
  CompileReport& rep = art.report;
  const Plan& plan = *art.plan;
  rep.mode = options.mode();
  rep.num_ops = graph.num_ops();  // recompute's per-core plan ops are not ops of the graph
  rep.arena_bytes = plan.memory.arena_bytes;
  rep.peak_live_bytes = plan.memory.peak_live_bytes;
  rep.unplanned_bytes = plan.memory.unplanned_bytes;
  rep.variable_bytes = plan.memory.variable_bytes;
  rep.pass_timings = timings;
  rep.pass_dumps = printed;
  if (art.mode == ExecutionMode::kEager) {
    rep.num_launches = 0;
    for (const PlanOp& op : plan.ops) rep.num_launches += op.is_kernel() ? 1 : 0;
  } else {
    rep.num_launches = art.program.launches.size();
    rep.program_text = print_program(art.program);
  }
  if (!options.prefetch) {
    // build_plan zeroed each prefetch's byte count; say how many ops that silenced.
    size_t silenced = 0;
    for (const PlanOp& op : plan.ops) {
      sk_prefetch_attrs a{};
      if (op.kernel_name != kPrefetchKernel || op.attrs.size() != sizeof a) continue;
      std::memcpy(&a, op.attrs.data(), sizeof a);
      silenced += a.bytes == 0 ? 1 : 0;
    }
    if (silenced > 0)
      rep.warnings.push_back("prefetch=false: " + std::to_string(silenced) + " prefetch op(s) run as no-ops");
  }
  return art;
}

std::string explain_text(const Graph& graph, const CompileOptions& options, const CompileReport& r) {
  std::string out = "graph '" + graph.name() + "': mode " + execution_mode_name(r.mode) + ", " +
                    std::to_string(r.num_ops) + " ops, " + std::to_string(r.num_launches) + " launches per run\n";
  out += "memory: arena " + std::to_string(r.arena_bytes) + " bytes, peak live " + std::to_string(r.peak_live_bytes) +
         " bytes, without reuse " + std::to_string(r.unplanned_bytes) + " bytes; variables " +
         std::to_string(r.variable_bytes) + " bytes outside the arena\n";
  const SuperKernelOptimizeOptions& o = options.super_kernel_optimize_options;
  if (o.jit && r.mode != ExecutionMode::kEager)
    out += "backend: x86-64 JIT (generated code per core; traced and profiled launches run on the interpreter)\n";
  if (o.kernel_replicas > 1)
    out += "kernel replicas: " + std::to_string(o.kernel_replicas) +
           " copies of every kernel package in use; core c calls copy c % " + std::to_string(o.kernel_replicas) + "\n";
  for (const SegmentReport& s : r.segments) {
    out += "segment " + std::to_string(s.id) + " scope '" + s.scope + "' ops " + std::to_string(s.ops.size()) +
           " cores " + std::to_string(s.num_cores) + " cut " + cut_reason_name(s.cut);
    if (s.cut_op >= 0) out += " at op '" + graph.op(s.cut_op).name + "'";
    if (!s.cut_detail.empty()) out += " (" + s.cut_detail + ")";
    out += "\n";
    for (const std::string& p : s.partitions) out += "  partition " + p + "\n";
    for (const std::string& c : s.collectives) out += "  collective: " + c + "\n";
    for (const std::string& p : s.sync_points) out += "  cross-stream sync: " + p + "\n";
    if (!s.schedule.empty()) out += "  schedule: " + s.schedule + "\n";
    for (const std::string& d : s.recompute) out += "  recompute: " + d + "\n";
  }
  for (const UnfusedOp& u : r.unfused)
    out += "unfused op '" + graph.op(u.op).name + "': " + cut_reason_name(u.reason) + "\n";
  for (const std::string& w : r.warnings) out += "warning: " + w + "\n";
  // Timings differ from run to run; the rest of the text is stable enough to diff, so they appear
  // only with print_after, beside the passes' dumps.
  if (!options.print_after.empty()) out += "passes: " + r.pass_timings + "\n";
  out += r.pass_dumps;
  out += r.program_text;
  return out;
}

}  // namespace sk
