#include "compiler/segment.h"

#include <algorithm>
#include <map>

namespace sk {
namespace {

bool is_event(const PlanOp& op) { return op.kind == OpKind::kRecordEvent || op.kind == OpKind::kWaitEvent; }
bool is_fusible_kernel(const PlanOp& op) { return op.is_kernel() && (op.kernel->desc->flags & SK_FUSIBLE); }

std::string stack_label(const Graph& g, const std::vector<int32_t>& stack) {
  if (stack.empty()) return "<graph>";
  std::string s;
  for (int32_t id : stack) s += (s.empty() ? "" : "/") + g.scope(id).name;
  return s;
}

std::string describe_op(const PlanOp& op) {
  if (op.kind == OpKind::kHost) return "host op '" + op.name + "'";
  return "op '" + op.name + "' (kernel '" + op.kernel_name + "')";
}

}  // namespace

Status segment_graph(CompileContext& ctx) {
  const Graph& g = ctx.graph;
  Plan& plan = *ctx.plan;
  const int32_t n_ops = static_cast<int32_t>(plan.ops.size());
  ctx.segments.clear();
  ctx.op_segment.assign(n_ops, -1);
  ctx.op_unfused.assign(n_ops, CutReason::kNotFused);

  // Scope options, parsed once per scope.
  std::vector<ScopeOptions> parsed(g.num_scopes());
  for (size_t id = 1; id < g.num_scopes(); ++id) {
    auto o = parse_scope_options(g.scope(static_cast<int32_t>(id)).name, g.scope(static_cast<int32_t>(id)).options,
                                 &ctx.report.warnings);
    if (!o) return o.status();
    parsed[id] = *o;
  }

  bool has_named_scopes = false;
  for (const PlanOp& op : plan.ops)
    for (int32_t s : g.op(op.graph_op).scopes) has_named_scopes |= s != 0;

  // The fusion key of an op is its scope stack; ops fuse only with neighbours of the same key.
  // An op under a "do not fuse" marker, or outside every scope when scopes exist, has none.
  auto key_of = [&](const PlanOp& op) -> std::optional<std::vector<int32_t>> {
    const std::vector<int32_t>& stack = g.op(op.graph_op).scopes;
    if (std::find(stack.begin(), stack.end(), 0) != stack.end()) return std::nullopt;
    if (has_named_scopes && stack.empty()) return std::nullopt;
    return has_named_scopes ? stack : std::vector<int32_t>{};
  };
  auto options_of = [&](const std::vector<int32_t>& stack) {
    ScopeOptions o;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) o.inherit(parsed[*it]);
    return o;
  };

  // strict-scope-check: decide, per scope stack, what an op that cannot fuse does to it.
  std::map<std::vector<int32_t>, bool> bypassed;
  for (const PlanOp& op : plan.ops) {
    if (is_event(op) || is_fusible_kernel(op)) continue;
    auto key = key_of(op);
    if (!key || key->empty()) continue;  // not in a named scope: simply unfused
    const ScopeOptions o = options_of(*key);
    const std::string scope = stack_label(g, *key);
    switch (o.strict_scope_check) {
      case StrictScopeCheck::kAbort:
        return Status::invalid_argument("scope '" + scope + "': " + describe_op(op) +
                                        " cannot be fused (strict-scope-check=abort)");
      case StrictScopeCheck::kBypass:
        if (!bypassed[*key])
          ctx.report.warnings.push_back("scope '" + scope + "' runs unfused: " + describe_op(op) +
                                        " cannot be fused (strict-scope-check=bypass)");
        bypassed[*key] = true;
        break;
      case StrictScopeCheck::kDefault:
        if (op.kind == OpKind::kHost)
          return Status::invalid_argument("scope '" + scope + "': " + describe_op(op) +
                                          " is a graph break inside a fusion scope; move it out of the scope, or set "
                                          "strict-scope-check=bypass to run the scope unfused");
        break;
    }
  }

  // Walk ops in execution order, growing the open segment while ops share its key and stream.
  int32_t open = -1;
  auto close = [&](CutReason reason, int32_t at, std::string detail = "") {
    if (open < 0) return;
    Segment& s = ctx.segments[open];
    s.cut = reason;
    s.cut_op = at;
    s.cut_detail = std::move(detail);
    open = -1;
  };
  for (int32_t i = 0; i < n_ops; ++i) {
    const PlanOp& op = plan.ops[i];
    if (is_event(op)) continue;  // record/wait order nothing beyond program order on one stream
    auto key = key_of(op);
    CutReason unfused_reason = CutReason::kNotFused;
    bool fuse = true;
    if (!key) {
      fuse = false;
    } else if (bypassed[*key]) {
      fuse = false;
      unfused_reason = CutReason::kScopeBypassed;
    } else if (op.kind == OpKind::kHost) {
      fuse = false;
      unfused_reason = CutReason::kHostOp;
    } else if (!is_fusible_kernel(op)) {
      fuse = false;
      unfused_reason = CutReason::kOpUnsupported;
    }
    if (!fuse) {
      if (op.kind == OpKind::kHost) unfused_reason = CutReason::kHostOp;
      close(unfused_reason, i, describe_op(op) + " runs outside the super kernel");
      ctx.op_unfused[i] = unfused_reason;
      continue;
    }
    const int32_t stream = g.op(op.graph_op).stream;
    if (open >= 0) {
      const Segment& cur = ctx.segments[open];
      if (cur.scopes != *key) {
        close(CutReason::kScopeBoundary, i, "next op belongs to scope '" + stack_label(g, *key) + "'");
      } else if (cur.stream != stream) {
        close(CutReason::kStreamLimit, i,
              "next op is on stream '" + g.stream_name(stream) + "' and stream fusion is off");
      }
    }
    if (open < 0) {
      Segment s;
      s.id = static_cast<int32_t>(ctx.segments.size());
      s.scopes = *key;
      s.scope_label = stack_label(g, *key);
      s.options = options_of(*key);
      s.stream = stream;
      ctx.segments.push_back(std::move(s));
      open = static_cast<int32_t>(ctx.segments.size() - 1);
    }
    ctx.segments[open].ops.push_back(i);
  }
  close(CutReason::kGraphEnd, -1);

  // split-mode: divide each segment into at most N launches of nearly equal op counts.
  std::vector<Segment> split;
  for (Segment& s : ctx.segments) {
    int parts = s.options.split_mode > 0 ? s.options.split_mode : ctx.options.super_kernel_optimize_options.split_mode;
    parts = std::clamp(parts, 1, static_cast<int>(s.ops.size()));
    for (int p = 0; p < parts; ++p) {
      const size_t b = s.ops.size() * p / parts, e = s.ops.size() * (p + 1) / parts;
      Segment piece = s;
      piece.ops.assign(s.ops.begin() + static_cast<std::ptrdiff_t>(b), s.ops.begin() + static_cast<std::ptrdiff_t>(e));
      if (p + 1 < parts) {
        piece.cut = CutReason::kSplitMode;
        piece.cut_op = s.ops[e];
        piece.cut_detail = "split-mode=" + std::to_string(parts);
      }
      piece.id = static_cast<int32_t>(split.size());
      split.push_back(std::move(piece));
    }
  }
  ctx.segments = std::move(split);
  for (const Segment& s : ctx.segments)
    for (int32_t op : s.ops) ctx.op_segment[op] = s.id;
  return Status::ok();
}

}  // namespace sk
