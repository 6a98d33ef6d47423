// Runtime::compile and sk::explain: the compiler turns the graph into a CompiledArtifact for this
// runtime's core layout and kernel packages; the executable takes the artifact over and adds
// what only running needs (input names, dump and trace state).
#include "compiler/compiler.h"
#include "runtime/runtime_impl.h"

namespace sk {
namespace {

Expected<CompiledArtifact> compile_for(Runtime& rt, const Graph& graph, const CompileOptions& options) {
  Runtime::Impl& ri = rt.impl();
  auto art = compile_graph(graph, options, ri.registry, CoreLayout{ri.device->num_cores(), ri.device->cube_cores()});
  if (!art) return art.status();
  const SuperKernelOptimizeOptions& o = options.super_kernel_optimize_options;
  if (o.func_align != 0 && !o.jit)
    art->report.warnings.push_back(
        "super_kernel_optimize_options.func_align has no effect on the CPU interpreter backend (it aligns the JIT's "
        "generated functions)");
  return art;
}

}  // namespace

Expected<std::unique_ptr<Executable>> Runtime::compile(const Graph& graph, const CompileOptions& options) {
  auto art = compile_for(*this, graph, options);
  if (!art) return art.status();
  auto exe = std::make_unique<Executable::Impl>();
  exe->runtime = shared_from_this();
  exe->mode = art->mode;
  exe->plan = std::move(art->plan);
  exe->program = std::move(art->program);
  exe->report = std::move(art->report);
  // Eager mode has no program to generate code for: it launches op by op, like the dispatch of an
  // eager framework, and runs them on the interpreter.
  if (options.super_kernel_optimize_options.jit && exe->mode != ExecutionMode::kEager) {
    auto jit = cpu::JitProgram::build(*impl().device, *exe->plan, exe->program);
    if (!jit) return jit.status();
    exe->jit = std::move(*jit);
    exe->report.jit_code_bytes = exe->jit->code_bytes();
  }
  exe->dump_enabled = options.dump;
  exe->dump_dir = options.dump_dir;
  exe->trace_enabled = options.super_kernel_debug_options.debug_op_exec_trace || !options.trace.empty();
  exe->trace_path = options.trace;
  exe->access_check = options.super_kernel_debug_options.debug_cross_core_sync_check;
  const Plan& plan = *exe->plan;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorInfo& t = plan.tensors[i];
    if (t.kind == TensorKind::kInput || t.kind == TensorKind::kVariable)
      exe->names.emplace(t.name, static_cast<int32_t>(i));
    if (t.kind == TensorKind::kInput) exe->unset_inputs.push_back(static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorInfo& t = plan.tensors[i];
    if (t.is_output) {
      exe->names[t.output_name] = static_cast<int32_t>(i);
      exe->output_names.push_back(t.output_name);
    }
  }
  return std::make_unique<Executable>(std::move(exe));
}

Expected<std::string> explain(Runtime& runtime, const Graph& graph, const CompileOptions& options) {
  auto art = compile_for(runtime, graph, options);
  if (!art) return art.status();
  return explain_text(graph, options, art->report);
}

}  // namespace sk
