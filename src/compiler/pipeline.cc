// The compiler pipeline: named passes run in order, each timed. The order is the data flow of
// DESIGN.md §3: verify -> build_plan -> assign_cores -> memory_plan -> allocate -> program.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "compiler/assign_cores.h"
#include "compiler/build_plan.h"
#include "compiler/compile_context.h"
#include "compiler/graph_program.h"
#include "compiler/memory_plan.h"
#include "compiler/schedule.h"
#include "compiler/segment.h"
#include "runtime/runtime_impl.h"

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
  return ctx.graph.verify();
}

Status memory_plan_pass(CompileContext& ctx) {
  MemoryPlanOptions mp;
  // Eager mode allocates every tensor on its own; the data dump needs every output intact until
  // it is copied at the end of its launch.
  mp.reuse = ctx.options.mode() != ExecutionMode::kEager && !ctx.options.dump;
  plan_memory(*ctx.plan, mp);
  return Status::ok();
}

Status allocate_pass(CompileContext& ctx) {
  Plan& plan = *ctx.plan;
  plan.arena = AlignedBuffer::allocate(static_cast<size_t>(plan.memory.arena_bytes));
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
                    std::to_string(ctx.plan->memory.peak_live_bytes) + "\n";
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
    out += " | cut " + std::string(cut_reason_name(s.cut)) + "\n";
  }
  return out;
}

std::vector<Pass> pipeline(ExecutionMode mode) {
  std::vector<Pass> passes = {
      {"verify", verify_pass,
       [](const CompileContext& c) { return "  " + std::to_string(c.graph.num_ops()) + " ops ok\n"; }},
      {"build_plan", build_plan, describe_plan},
      {"assign_cores", assign_cores, describe_plan},
      {"memory_plan", memory_plan_pass, describe_memory},
      {"allocate", allocate_pass, describe_memory},
  };
  auto program_text = [](const CompileContext& c) { return print_program(c.program); };
  if (mode == ExecutionMode::kGraph) passes.push_back({"graph_program", build_graph_program, program_text});
  if (mode == ExecutionMode::kSuperKernel) {
    passes.push_back({"segment", segment_graph, describe_segments});
    passes.push_back({"schedule", schedule_segments, program_text});
  }
  return passes;
}

Expected<std::unique_ptr<Executable::Impl>> run_pipeline(Runtime& rt, const Graph& graph,
                                                         const CompileOptions& options) {
  Runtime::Impl& ri = rt.impl();
  CompileContext ctx{graph, options, ri.registry, CoreLayout{ri.device->num_cores(), ri.device->cube_cores()}};
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
  auto exe = std::make_unique<Executable::Impl>();
  exe->mode = options.mode();
  exe->plan = std::move(ctx.plan);
  exe->program = std::move(ctx.program);
  exe->report = std::move(ctx.report);
  CompileReport& rep = exe->report;
  const Plan& plan = *exe->plan;
  rep.mode = options.mode();
  rep.num_ops = plan.ops.size();
  rep.arena_bytes = plan.memory.arena_bytes;
  rep.peak_live_bytes = plan.memory.peak_live_bytes;
  rep.unplanned_bytes = plan.memory.unplanned_bytes;
  rep.pass_timings = timings;
  rep.pass_dumps = printed;
  if (exe->mode == ExecutionMode::kEager) {
    rep.num_launches = 0;
    for (const PlanOp& op : plan.ops) rep.num_launches += op.is_kernel() ? 1 : 0;
  } else {
    rep.num_launches = exe->program.launches.size();
    rep.program_text = print_program(exe->program);
  }
  if (options.super_kernel_optimize_options.func_align != 0)
    rep.warnings.push_back("super_kernel_optimize_options.func_align has no effect on the CPU interpreter backend");
  exe->dump_enabled = options.dump;
  exe->dump_dir = options.dump_dir;
  exe->trace_enabled = options.super_kernel_debug_options.debug_op_exec_trace || !options.trace.empty();
  exe->trace_path = options.trace;
  exe->access_check = options.super_kernel_debug_options.debug_cross_core_sync_check;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorInfo& t = plan.tensors[i];
    if (t.kind == TensorKind::kInput || t.kind == TensorKind::kVariable)
      exe->names.emplace(t.name, static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorInfo& t = plan.tensors[i];
    if (t.is_output) {
      exe->names[t.output_name] = static_cast<int32_t>(i);
      exe->output_names.push_back(t.output_name);
    }
  }
  return exe;
}

}  // namespace

Expected<std::unique_ptr<Executable>> Runtime::compile(const Graph& graph, const CompileOptions& options) {
  auto impl = run_pipeline(*this, graph, options);
  if (!impl) return impl.status();
  (*impl)->runtime = shared_from_this();
  return std::make_unique<Executable>(std::move(*impl));
}

Expected<std::string> explain(Runtime& runtime, const Graph& graph, const CompileOptions& options) {
  auto impl = run_pipeline(runtime, graph, options);
  if (!impl) return impl.status();
  const CompileReport& r = (*impl)->report;
  std::string out = "graph '" + graph.name() + "': mode " + execution_mode_name(r.mode) + ", " +
                    std::to_string(r.num_ops) + " ops, " + std::to_string(r.num_launches) + " launches per run\n";
  out += "memory: arena " + std::to_string(r.arena_bytes) + " bytes, peak live " + std::to_string(r.peak_live_bytes) +
         " bytes, without reuse " + std::to_string(r.unplanned_bytes) + " bytes\n";
  for (const SegmentReport& s : r.segments) {
    out += "segment " + std::to_string(s.id) + " scope '" + s.scope + "' ops " + std::to_string(s.ops.size()) +
           " cores " + std::to_string(s.num_cores) + " cut " + cut_reason_name(s.cut);
    if (s.cut_op >= 0) out += " at op '" + graph.op(s.cut_op).name + "'";
    if (!s.cut_detail.empty()) out += " (" + s.cut_detail + ")";
    out += "\n";
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
