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

bool stream_fusion_on(const ScopeOptions& o, const CompileOptions& global) {
  return o.stream_fusion >= 0 ? o.stream_fusion == 1 : global.super_kernel_optimize_options.stream_fusion;
}

bool tiling_sink_on(const ScopeOptions& o, const CompileOptions& global) {
  return o.tiling_sink >= 0 ? o.tiling_sink == 1 : global.super_kernel_optimize_options.tiling_sink;
}

// Which setting turned tiling sink off for an op of scope `label`, for the cut's detail.
std::string tiling_sink_off_by(const ScopeOptions& o, const std::string& label) {
  if (o.tiling_sink == 0) return "scope '" + label + "' has tiling-sink=0";
  if (label == "<graph>") return "super_kernel_optimize_options.tiling_sink is false";
  return "super_kernel_optimize_options.tiling_sink is false (scope '" + label + "' leaves tiling-sink unset)";
}

// Cross-stream orderings from events: after a stream waits for an event, each of its ops in the
// same segment runs after the op the recording stream ran last before the record.
void collect_event_deps(CompileContext& ctx) {
  const Graph& g = ctx.graph;
  const Plan& plan = *ctx.plan;
  std::vector<int32_t> last_on_stream(g.num_streams(), -1);
  std::vector<int32_t> recorded_after(g.num_events(), -1);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> waited(g.num_streams());  // (producer, event)
  for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i) {
    const PlanOp& op = plan.ops[i];
    const OpInfo& info = g.op(op.graph_op);
    if (op.kind == OpKind::kRecordEvent) {
      recorded_after[info.event] = last_on_stream[info.stream];
    } else if (op.kind == OpKind::kWaitEvent) {
      const int32_t producer = recorded_after[info.event];
      if (producer >= 0) waited[info.stream].push_back({producer, info.event});
    } else if (op.is_kernel() || op.kind == OpKind::kHost) {
      const int32_t seg = ctx.op_segment[i];
      for (const auto& [producer, event] : waited[info.stream])
        if (seg >= 0 && ctx.op_segment[producer] == seg && g.op(plan.ops[producer].graph_op).stream != info.stream)
          ctx.segments[seg].event_deps.push_back({i, producer, event});
      last_on_stream[info.stream] = i;
    }
  }
}

}  // namespace

bool is_communication_kernel(std::string_view kernel_name) { return kernel_name.rfind("comm.", 0) == 0; }

namespace {

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
  auto stream_fusion_on = [&](const ScopeOptions& o) { return sk::stream_fusion_on(o, ctx.options); };
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
      unfused_reason = is_communication_kernel(op.kernel_name) ? CutReason::kCommunication : CutReason::kOpUnsupported;
    } else if (op.tiling_sink && !tiling_sink_on(options_of(*key), ctx.options)) {
      fuse = false;
      unfused_reason = CutReason::kTilingSink;
    }
    if (!fuse) {
      if (op.kind == OpKind::kHost) unfused_reason = CutReason::kHostOp;
      std::string detail = describe_op(op) + " runs outside the super kernel";
      if (unfused_reason == CutReason::kCommunication)
        detail = describe_op(op) +
                 " is communication that does not fuse (only AllReduce, ReduceScatter, AllGather and AlltoAll(v) do): "
                 "it runs in a launch of its own";
      if (unfused_reason == CutReason::kTilingSink)
        detail = describe_op(op) + " is a tiling-sink kernel and " +
                 tiling_sink_off_by(options_of(*key), stack_label(g, *key)) +
                 ": it runs unfused, tiled in its own launch";
      close(unfused_reason, i, std::move(detail));
      ctx.op_unfused[i] = unfused_reason;
      continue;
    }
    const int32_t stream = g.op(op.graph_op).stream;
    if (open >= 0) {
      Segment& cur = ctx.segments[open];
      const int32_t prev_stream = g.op(plan.ops[cur.ops.back()].graph_op).stream;
      const bool fuse_streams = stream_fusion_on(cur.options) && stream_fusion_on(options_of(*key));
      const bool known_scope =
          std::find(cur.joined_scopes.begin(), cur.joined_scopes.end(), *key) != cur.joined_scopes.end();
      if (known_scope) {
        if (std::find(cur.streams.begin(), cur.streams.end(), stream) == cur.streams.end() && !fuse_streams)
          return Status::invalid_argument(
              "scope '" + cur.scope_label + "': op '" + op.name + "' on stream '" + g.stream_name(stream) +
              "' would share one super kernel with stream '" + g.stream_name(cur.streams.front()) +
              "', but stream fusion is off; set the scope option stream-fusion=1 (or "
              "super_kernel_optimize_options.stream_fusion=true), or give each stream its own scope");
      } else if (stream != prev_stream && fuse_streams) {
        // A scope change at a stream switch: concurrent branches live in scopes of their own.
        cur.joined_scopes.push_back(*key);
        cur.scope_label += " + " + stack_label(g, *key);
      } else if (stream != prev_stream) {
        close(CutReason::kStreamLimit, i,
              "next op is on stream '" + g.stream_name(stream) + "' in scope '" + stack_label(g, *key) +
                  "'; with stream-fusion=1 on both scopes they would share one super kernel");
      } else {
        close(CutReason::kScopeBoundary, i, "next op belongs to scope '" + stack_label(g, *key) + "'");
      }
    }
    if (open < 0) {
      Segment s;
      s.id = static_cast<int32_t>(ctx.segments.size());
      s.scopes = *key;
      s.joined_scopes = {*key};
      s.scope_label = stack_label(g, *key);
      s.options = options_of(*key);
      ctx.segments.push_back(std::move(s));
      open = static_cast<int32_t>(ctx.segments.size() - 1);
    }
    Segment& target = ctx.segments[open];
    if (std::find(target.streams.begin(), target.streams.end(), stream) == target.streams.end())
      target.streams.push_back(stream);
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
      piece.streams.clear();
      for (int32_t op : piece.ops) {
        const int32_t stream = g.op(plan.ops[op].graph_op).stream;
        if (std::find(piece.streams.begin(), piece.streams.end(), stream) == piece.streams.end())
          piece.streams.push_back(stream);
      }
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
  collect_event_deps(ctx);
  return Status::ok();
}

}  // namespace sk
