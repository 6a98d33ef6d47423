#include "compiler/code_layout.h"

namespace sk {
namespace {

// Adds the PRELOADs of one core's program (see code_layout.h).
std::vector<Instr> with_preloads(const std::vector<Instr>& instrs, const Plan& plan, PreloadCode mode) {
  std::vector<size_t> runs;
  for (size_t i = 0; i < instrs.size(); ++i)
    if (instrs[i].op == Opcode::kRun) runs.push_back(i);
  if (runs.empty()) return instrs;
  const auto preload = [&](int32_t op) { return Instr{Opcode::kPreload, op, static_cast<int32_t>(mode), 0}; };
  std::vector<Instr> out;
  out.reserve(instrs.size() + runs.size() + 1);
  out.push_back(preload(instrs[runs[0]].a));
  size_t next = 0;  // index into runs of the next RUN at or after i
  for (size_t i = 0; i < instrs.size(); ++i) {
    if (next < runs.size() && runs[next] == i) {
      ++next;
      if (next < runs.size()) {
        const int32_t this_op = instrs[i].a, next_op = instrs[runs[next]].a;
        // The same kernel's code is hot already: it is what runs now.
        if (plan.ops[this_op].kernel != plan.ops[next_op].kernel) out.push_back(preload(next_op));
      }
    }
    out.push_back(instrs[i]);
  }
  return out;
}

}  // namespace

Status layout_code(CompileContext& ctx) {
  const SuperKernelOptimizeOptions& global = ctx.options.super_kernel_optimize_options;
  for (Launch& launch : ctx.program.launches) {
    if (launch.segment < 0 || static_cast<size_t>(launch.segment) >= ctx.segments.size()) continue;
    const ScopeOptions& scope = ctx.segments[launch.segment].options;
    const auto mode = scope.preload_code >= 0 ? static_cast<PreloadCode>(scope.preload_code) : global.preload_code;
    launch.func_align = scope.func_align >= 0 ? scope.func_align : global.func_align;
    if (mode == PreloadCode::kNone) continue;
    for (CoreProgram& core : launch.cores) core.instrs = with_preloads(core.instrs, *ctx.plan, mode);
  }
  return Status::ok();
}

}  // namespace sk
