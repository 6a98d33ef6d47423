// How each execution mode runs a compiled plan.
//  eager:        per op, on the host: look the kernel up by name, run its tiling, build the
//                arguments, launch it on its cores and join.
//  graph / superkernel: walk the Program's steps: launches run on the device interpreter (or as
//                the JIT's generated code, when built and the launch is not traced), host ops on
//                the calling thread.
#include <algorithm>
#include <cstring>

#include "program/emit.h"
#include "program/plan.h"
#include "runtime/access_check.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/runtime_impl.h"
#include "runtime/trace_record.h"

namespace sk {
namespace {

HostTensor host_view(const Plan& plan, int32_t id) {
  const TensorInfo& t = plan.tensors[id];
  HostTensor h;
  h.data = plan.tensor_data[id];
  h.dtype = t.dtype;
  h.shape = t.shape;
  h.strides = t.strides;
  return h;
}

}  // namespace

Status run_host_op(Plan& plan, PlanOp& op) {
  HostOpContext ctx;
  for (int32_t id : op.input_ids) ctx.inputs.push_back(host_view(plan, id));
  for (int32_t id : op.output_ids) ctx.outputs.push_back(host_view(plan, id));
  Status s = op.host(ctx);
  if (!s) return s.with_context("host op '" + op.name + "'");
  return Status::ok();
}

void dump_op_outputs(Executable::Impl& exe, const PlanOp& op) {
  const Plan& plan = *exe.plan;
  for (int32_t id : op.output_ids) {
    const TensorInfo& t = plan.tensors[id];
    DumpRecord r;
    r.op = op.name;
    r.tensor = t.name;
    r.dtype = t.dtype;
    r.shape = t.shape;
    r.data.resize(static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype));
    gather_dense(plan.tensor_data[id], t.shape, t.strides, dtype_size(t.dtype), r.data.data());
    exe.dump.push_back(std::move(r));
  }
}

Status run_eager(Executable::Impl& exe) {
  Plan& plan = *exe.plan;
  cpu::CpuDevice& dev = exe.device();
  const KernelRegistry& registry = exe.registry();
  const int64_t run_start = cpu::now_ns();
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    PlanOp& planned = plan.ops[i];
    if (planned.kind == OpKind::kHost) {
      const int64_t t0 = exe.trace_enabled ? cpu::now_ns() : 0;
      SK_RETURN_IF_ERROR(run_host_op(plan, planned));
      if (exe.trace_enabled)
        append_host_trace(planned, static_cast<int32_t>(i), t0 - run_start, cpu::now_ns() - run_start, exe.trace);
      if (exe.dump_enabled) dump_op_outputs(exe, planned);
      continue;
    }
    if (!planned.is_kernel()) continue;
    // The dispatch work an eager framework does for every op, every time.
    PlanOp op;
    op.name = planned.name;
    op.kind = planned.kind;
    op.kernel_name = planned.kernel_name;
    op.kernel = registry.find(op.kernel_name);
    op.replicas = planned.replicas;
    if (!op.kernel) return Status::not_found("op '" + op.name + "': kernel '" + op.kernel_name + "' disappeared");
    op.input_ids = planned.input_ids;
    op.constant_inputs = planned.constant_inputs;
    op.output_ids = planned.output_ids;
    for (int32_t id : op.input_ids) {
      op.inputs.push_back(make_tensor_arg(plan.tensors[id]));
      op.inputs.back().data = plan.tensor_data[id];
    }
    for (int32_t id : op.output_ids) {
      op.outputs.push_back(make_tensor_arg(plan.tensors[id]));
      op.outputs.back().data = plan.tensor_data[id];
    }
    op.attrs = planned.attrs;
    op.workspace_bytes = planned.workspace_bytes;
    op.cores = planned.cores;
    // Eager runs every tiling on the host, sink or not: the inputs are ready by now.
    op.tiling_sink = planned.tiling_sink;  // for the limit and the message only
    SK_RETURN_IF_ERROR(run_tiling(op, planned.tiling_sink ? kTilingSinkCapacity : kMaxHostTilingBytes));
    op.tiling_sink = false;  // its tiling is computed: eager binds it like any other
    op.bind_args();
    if (planned.workspace_offset >= 0) op.args.workspace = plan.arena.data.get() + planned.workspace_offset;

    const int32_t n = *std::max_element(op.cores.begin(), op.cores.end()) + 1;
    Launch launch = make_launch("eager op '" + op.name + "'", n);
    emit_op_on_all_cores(launch, op, 0);
    cpu::LaunchOptions lo;
    std::vector<std::vector<cpu::RawTraceEvent>> raw;
    if (exe.trace_enabled) {
      raw.resize(n);
      lo.trace = &raw;
    }
    // The op's chunk layouts (runtime/cpu/chunk_layout.h) live with the planned op: built once,
    // and never freed while the device's helper may still write their scratch.
    op.chunk_layouts = planned.chunk_layouts;
    Status s = exe.access_check ? run_access_checked(dev, plan, op, launch) : cpu::run_launch(dev, &op, launch, lo);
    planned.chunk_layouts = op.chunk_layouts;
    if (!s) return s;
    if (exe.trace_enabled)
      append_launch_trace(plan, launch, static_cast<int32_t>(i), raw, run_start, static_cast<int32_t>(i), exe.trace);
    if (exe.dump_enabled) dump_op_outputs(exe, planned);
  }
  return Status::ok();
}

Status run_program(Executable::Impl& exe) {
  Plan& plan = *exe.plan;
  cpu::CpuDevice& dev = exe.device();
  const int64_t run_start = cpu::now_ns();
  for (const Step& step : exe.program.steps) {
    if (step.kind == Step::Kind::kHost) {
      const int64_t t0 = exe.trace_enabled ? cpu::now_ns() : 0;
      SK_RETURN_IF_ERROR(run_host_op(plan, plan.ops[step.index]));
      if (exe.trace_enabled)
        append_host_trace(plan.ops[step.index], step.index, t0 - run_start, cpu::now_ns() - run_start, exe.trace);
      if (exe.dump_enabled) dump_op_outputs(exe, plan.ops[step.index]);
      continue;
    }
    const Launch& launch = exe.program.launches[step.index];
    cpu::LaunchOptions lo;
    std::vector<std::vector<cpu::RawTraceEvent>> raw;
    const bool tracing = exe.trace_enabled || launch.profile;
    if (tracing) {
      raw.resize(launch.num_cores);
      lo.trace = &raw;
    }
    SK_RETURN_IF_ERROR(exe.jit && !tracing ? exe.jit->run(step.index)
                                           : cpu::run_launch(dev, plan.ops.data(), launch, lo));
    if (tracing) append_launch_trace(plan, launch, step.index, raw, run_start, -1, exe.trace);
    // Outputs are copied at the end of their launch; with the dump on, no buffer is reused.
    if (exe.dump_enabled)
      for (int32_t op : launch.ops) dump_op_outputs(exe, plan.ops[op]);
  }
  return Status::ok();
}

}  // namespace sk
