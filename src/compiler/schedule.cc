#include "compiler/schedule.h"

#include <algorithm>
#include <unordered_map>

#include "compiler/access_ranges.h"
#include "compiler/assign_cores.h"
#include "compiler/graph_program.h"
#include "compiler/interval_map.h"

namespace sk {
namespace {

using Range = ByteRange;

Range tiling_buffer(const PlanOp& op) {
  const auto t = reinterpret_cast<uint64_t>(op.tiling.data());
  return {t, t + op.tiling.size()};
}

// A tiling-sink op's TILING step reads every input and writes the op's tiling buffer.
void collect_tiling_access(const PlanOp& op, CoreAccess& out) {
  for (const sk_tensor_arg& t : op.inputs) out.reads.push_back(operand_extent(t));
  out.writes.push_back(tiling_buffer(op));
}

bool uses_sync_all(const PlanOp& op) { return (op.kernel->desc->flags & SK_USES_SYNC_ALL) != 0; }

// debug-aic-num / debug-aiv-num: cap the cores of the segment's cube and vector kernels. The caps
// never raise a core count above the hardware, a LimitCoreNum or the kernel's natural count.
Status apply_core_caps(CompileContext& ctx, const Segment& seg) {
  const int aic = seg.options.debug_aic_num, aiv = seg.options.debug_aiv_num;
  if (aic < 0 && aiv < 0) return Status::ok();
  auto combine = [](int32_t limit, int cap) -> int32_t {
    if (cap < 0) return limit;
    return limit == 0 ? cap : std::min<int32_t>(limit, cap);
  };
  for (int32_t i : seg.ops) {
    PlanOp& op = ctx.plan->ops[i];
    const int32_t type = op.kernel->desc->type;
    const bool needs_cube = type != SK_KERNEL_VECTOR;
    const bool needs_vector = type != SK_KERNEL_CUBE;
    if ((needs_cube && aic == 0) || (needs_vector && aiv == 0))
      return Status::invalid_argument("scope '" + seg.scope_label + "': debug-aic-num=" + std::to_string(aic) +
                                      " / debug-aiv-num=" + std::to_string(aiv) + " leaves no core for op '" + op.name +
                                      "' (kernel '" + op.kernel_name + "')");
    const OpInfo& info = ctx.graph.op(op.graph_op);
    auto cores =
        cores_for_kernel(ctx.layout, type, combine(info.core_limit_cube, aic), combine(info.core_limit_vector, aiv),
                         ctx.options.super_kernel_debug_options.debug_per_op_max_core_num, op.name);
    if (!cores) return cores.status();
    // Stay inside the op's stream partition (its cores are contiguous without a cube/vector split).
    if (ctx.layout.cube_cores == 0)
      for (int32_t& c : *cores) c += op.cores.front();
    // Only ever narrow: a cap above the natural count changes nothing.
    if (cores->size() < op.cores.size()) op.cores = std::move(*cores);
  }
  return Status::ok();
}

// One schedulable step of a segment: an op's RUN on its cores, or a tiling-sink op's TILING
// on its first core (a step of its own, so the dependency analysis orders it like any op).
struct Task {
  int32_t op_index = 0;
  bool tiling = false;
  std::vector<int32_t> cores;
};

struct Wait {
  int32_t position;  // consumer task
  int32_t core;      // producer core
  int32_t producer;  // producer task
};

// "op 'a' (stream 'moe')", for the cross-stream sync points explain prints.
std::string op_on_stream(const CompileContext& ctx, int32_t op_index) {
  const PlanOp& op = ctx.plan->ops[op_index];
  return "op '" + op.name + "' (stream '" + ctx.graph.stream_name(ctx.graph.op(op.graph_op).stream) + "')";
}

Expected<Launch> schedule_segment(CompileContext& ctx, const Segment& seg, std::vector<std::string>& sync_points) {
  Plan& plan = *ctx.plan;
  int32_t n_cores = 1;
  for (int32_t i : seg.ops)
    for (int32_t c : plan.ops[i].cores) n_cores = std::max(n_cores, c + 1);

  // Whole-graph fusion has no scope to carry feed-sync-all, so idle cores are fed there.
  const bool feed = seg.options.feed_sync_all >= 0 ? seg.options.feed_sync_all == 1 : seg.scopes.empty();
  const bool sync_every = seg.options.debug_sync_all == 1 || ctx.options.super_kernel_debug_options.debug_sync_all;
  for (int32_t i : seg.ops) {
    const PlanOp& op = plan.ops[i];
    if (uses_sync_all(op) && static_cast<int32_t>(op.cores.size()) < n_cores && !feed)
      return Status::invalid_argument("scope '" + seg.scope_label + "': op '" + op.name + "' (kernel '" +
                                      op.kernel_name + "') calls sync_all on " + std::to_string(op.cores.size()) +
                                      " of the super kernel's " + std::to_string(n_cores) +
                                      " cores, which would deadlock; set feed-sync-all=1 on the scope so the idle "
                                      "cores join its syncs");
  }

  std::vector<Task> tasks;
  for (int32_t i : seg.ops) {
    const PlanOp& op = plan.ops[i];
    if (op.tiling_sink) tasks.push_back({i, true, {op.cores[0]}});
    tasks.push_back({i, false, op.cores});
  }
  const int32_t n_tasks = static_cast<int32_t>(tasks.size());
  std::unordered_map<int32_t, int32_t> run_position;                     // plan op -> position of its RUN task
  std::unordered_map<int32_t, std::vector<const EventDep*>> event_deps;  // by consumer plan op
  for (const EventDep& dep : seg.event_deps) event_deps[dep.consumer].push_back(&dep);
  auto stream_of = [&](int32_t op_index) { return ctx.graph.op(plan.ops[op_index].graph_op).stream; };
  std::vector<std::pair<int32_t, int32_t>> synced;  // (consumer, producer) plan ops already reported

  std::vector<IntervalMap> writes(n_cores), reads(n_cores);
  std::vector<std::vector<int32_t>> vc(n_cores, std::vector<int32_t>(n_cores, -1));
  std::unordered_map<int64_t, std::vector<int32_t>> snapshot;  // (core, position) -> clock after it
  auto snap_key = [&](int32_t core, int32_t pos) { return static_cast<int64_t>(core) * n_tasks + pos; };
  std::vector<std::vector<Wait>> waits(n_cores);
  std::vector<std::vector<char>> signal_needed(n_cores, std::vector<char>(n_tasks, 0));
  auto merge_all = [&] {
    std::vector<int32_t> merged(n_cores, -1);
    for (const auto& clock : vc)
      for (int32_t p = 0; p < n_cores; ++p) merged[p] = std::max(merged[p], clock[p]);
    for (auto& clock : vc) clock = merged;
  };

  for (int32_t pos = 0; pos < n_tasks; ++pos) {
    const Task& task = tasks[pos];
    const PlanOp& op = plan.ops[task.op_index];
    const int32_t n = static_cast<int32_t>(task.cores.size());
    std::vector<CoreAccess> acc(n);
    if (task.tiling) {
      collect_tiling_access(op, acc[0]);
    } else {
      for (int32_t local = 0; local < n; ++local)
        SK_RETURN_IF_ERROR(collect_core_access(op, op.local_id(local), op.local_count(), acc[local]));
    }

    // Each core waits for the newest conflicting op (RAW, WAR, WAW) of every other core, unless
    // its vector clock shows it already knows that op finished (transitively).
    for (int32_t local = 0; local < n; ++local) {
      const int32_t c = task.cores[local];
      std::vector<std::pair<int32_t, int32_t>> need;  // (producer position, core)
      for (int32_t p = 0; p < n_cores; ++p) {
        if (p == c) continue;
        int32_t newest = -1;
        for (const Range& r : acc[local].reads) newest = std::max(newest, writes[p].latest(r.first, r.second));
        for (const Range& r : acc[local].writes)
          newest = std::max({newest, writes[p].latest(r.first, r.second), reads[p].latest(r.first, r.second)});
        if (newest > vc[c][p]) need.push_back({newest, p});
      }
      // Events order the consumer after every core of the op recorded before the event.
      const auto deps = event_deps.find(task.op_index);
      if (deps != event_deps.end())
        for (const EventDep* dep : deps->second) {
          const int32_t producer = run_position.at(dep->producer);
          for (int32_t p : tasks[producer].cores)
            if (p != c && producer > vc[c][p]) need.push_back({producer, p});
        }
      std::sort(need.rbegin(), need.rend());
      for (const auto& [producer, p] : need) {
        if (producer <= vc[c][p]) continue;  // learnt through an earlier wait
        waits[c].push_back({pos, p, producer});
        signal_needed[p][producer] = 1;
        const int32_t from = tasks[producer].op_index;
        if (stream_of(from) != stream_of(task.op_index) &&
            std::find(synced.begin(), synced.end(), std::pair{task.op_index, from}) == synced.end()) {
          synced.push_back({task.op_index, from});
          std::string why = ": data";
          if (deps != event_deps.end())
            for (const EventDep* dep : deps->second)
              if (dep->producer == from) why = ": event '" + ctx.graph.event_name(dep->event) + "'";
          sync_points.push_back(op_on_stream(ctx, task.op_index) + " waits for " + op_on_stream(ctx, from) + why);
        }
        const std::vector<int32_t>& theirs = snapshot.at(snap_key(p, producer));
        for (int32_t q = 0; q < n_cores; ++q) vc[c][q] = std::max(vc[c][q], theirs[q]);
      }
    }
    for (int32_t local = 0; local < n; ++local) {
      const int32_t c = task.cores[local];
      for (const Range& r : acc[local].reads) reads[c].paint(r.first, r.second, pos);
      for (const Range& r : acc[local].writes) writes[c].paint(r.first, r.second, pos);
    }
    // A sync_all inside the kernel (idle cores fed) is a barrier every core passes after its
    // earlier ops.
    if (!task.tiling && uses_sync_all(op)) merge_all();
    if (!task.tiling) run_position[task.op_index] = pos;
    for (int32_t c : task.cores) {
      vc[c][c] = pos;
      snapshot[snap_key(c, pos)] = vc[c];
    }
    if (sync_every && !task.tiling) merge_all();
  }

  // Number each core's signals, then emit the per-core programs.
  std::vector<std::vector<int32_t>> signal_index(n_cores, std::vector<int32_t>(n_tasks, 0));
  for (int32_t p = 0; p < n_cores; ++p) {
    int32_t count = 0;
    for (int32_t pos = 0; pos < n_tasks; ++pos)
      if (signal_needed[p][pos]) signal_index[p][pos] = ++count;
  }
  Launch launch = make_launch("segment " + std::to_string(seg.id) + " (scope " + seg.scope_label + ")", n_cores);
  launch.segment = seg.id;
  launch.ops = seg.ops;
  launch.profile = seg.options.profiling == 1;
  std::vector<size_t> cursor(n_cores, 0);
  for (int32_t pos = 0; pos < n_tasks; ++pos) {
    const Task& task = tasks[pos];
    const int32_t op_index = task.op_index;
    const PlanOp& op = plan.ops[op_index];
    const sk_kernel_desc* d = op.kernel->desc;
    for (int32_t c = 0; c < n_cores; ++c) {
      std::vector<Instr>& out = launch.cores[c].instrs;
      auto it = std::find(task.cores.begin(), task.cores.end(), c);
      if (it != task.cores.end()) {
        for (; cursor[c] < waits[c].size() && waits[c][cursor[c]].position == pos; ++cursor[c]) {
          const Wait& w = waits[c][cursor[c]];
          out.push_back({Opcode::kWait, w.core, signal_index[w.core][w.producer], 0});
        }
        const int32_t local = op.local_id(static_cast<int32_t>(it - task.cores.begin()));
        const int32_t n = op.local_count();
        if (task.tiling) {
          out.push_back({Opcode::kTiling, op_index, 0, 0});
        } else {
          if (d->prologue) out.push_back({Opcode::kPrologue, op_index, local, n});
          out.push_back({Opcode::kRun, op_index, local, n});
        }
        if (signal_needed[c][pos]) out.push_back({Opcode::kSignal, 0, signal_index[c][pos], 0});
      } else if (!task.tiling && uses_sync_all(op)) {
        for (uint32_t k = 0; k < d->sync_all_count; ++k) out.push_back({Opcode::kBarrier, 0, 0, 0});
      }
      if (sync_every && !task.tiling && pos + 1 < n_tasks) out.push_back({Opcode::kBarrier, 0, 0, 0});
    }
  }
  return launch;
}

}  // namespace

Status schedule_segments(CompileContext& ctx) {
  Plan& plan = *ctx.plan;
  Program& prog = ctx.program;
  prog = Program{};
  prog.op_labels = op_labels(plan);
  for (const Segment& seg : ctx.segments) SK_RETURN_IF_ERROR(apply_core_caps(ctx, seg));

  std::vector<std::vector<std::string>> sync_points(ctx.segments.size());
  GraphLaunchBuilder unfused(prog, ctx.layout.num_cores);
  for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i) {
    const PlanOp& op = plan.ops[i];
    const int32_t seg_id = ctx.op_segment[i];
    if (seg_id >= 0) {
      const Segment& seg = ctx.segments[seg_id];
      if (seg.ops.front() != i) continue;
      unfused.close();
      auto launch = schedule_segment(ctx, seg, sync_points[seg_id]);
      if (!launch) return launch.status();
      prog.launches.push_back(std::move(*launch));
      prog.steps.push_back({Step::Kind::kLaunch, static_cast<int32_t>(prog.launches.size() - 1)});
    } else if (op.kind == OpKind::kHost) {
      unfused.close();
      prog.steps.push_back({Step::Kind::kHost, i});
    } else if (op.is_kernel()) {
      unfused.add(op, i);
    }
  }

  for (const Segment& seg : ctx.segments) {
    SegmentReport r;
    r.id = seg.id;
    r.scope = seg.scope_label;
    for (int32_t i : seg.ops)  // a recomputed op's per-core plan ops are one graph op
      if (std::find(r.ops.begin(), r.ops.end(), plan.ops[i].graph_op) == r.ops.end())
        r.ops.push_back(plan.ops[i].graph_op);
    for (int32_t i : seg.ops)
      for (int32_t c : plan.ops[i].cores) r.num_cores = std::max(r.num_cores, c + 1);
    r.cut = seg.cut;
    r.cut_op = seg.cut_op;
    r.cut_detail = seg.cut_detail;
    for (const StreamPartition& p : seg.partitions)
      r.partitions.push_back(
          "stream '" + ctx.graph.stream_name(p.stream) + "' cores " + std::to_string(p.first_core) + "-" +
          std::to_string(p.first_core + p.num_cores - 1) +
          (p.core_limit > 0 ? " (LimitCoreNum " + std::to_string(p.core_limit) + ")" : " (no limit)"));
    r.sync_points = std::move(sync_points[seg.id]);
    ctx.report.segments.push_back(std::move(r));
  }
  for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i)
    if (ctx.op_segment[i] < 0 && (plan.ops[i].is_kernel() || plan.ops[i].kind == OpKind::kHost))
      ctx.report.unfused.push_back({i, ctx.op_unfused[i]});
  return Status::ok();
}

}  // namespace sk
