#include "compiler/schedule.h"

#include <algorithm>
#include <unordered_map>

#include "compiler/access_ranges.h"
#include "compiler/assign_cores.h"
#include "compiler/graph_program.h"
#include "compiler/interval_map.h"
#include "compiler/segment.h"

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

// One schedulable step of a segment: an op's RUN on its cores, a tiling-sink op's TILING on its
// first core, or (early start) an op's PROLOGUE on its cores. Each is a step of its own, so the
// dependency analysis orders it like any op: a prologue waits only for what it touches (its
// workspace), not for the op's inputs.
enum class TaskKind { kRun, kTiling, kPrologue };
struct Task {
  int32_t op_index = 0;
  TaskKind kind = TaskKind::kRun;
  std::vector<int32_t> cores;
};

struct Wait {
  int32_t position;  // consumer task
  int32_t core;      // producer core
  int32_t producer;  // producer task
};

struct GroupBarrier {
  int32_t position;  // task the barrier precedes
  int32_t group;
};

int effective_early_start(const CompileContext& ctx, const Segment& seg) {
  return seg.options.early_start >= 0 ? seg.options.early_start : ctx.options.super_kernel_optimize_options.early_start;
}

SyncChoice effective_sync_choice(const CompileContext& ctx, const Segment& seg) {
  return seg.options.sync_choice >= 0 ? static_cast<SyncChoice>(seg.options.sync_choice)
                                      : ctx.options.super_kernel_optimize_options.sync_choice;
}

// The barrier group of `launch` whose cores are exactly `cores` (sorted), added when missing; -1
// when the launch already declares as many groups as a backend keeps. Named after the kind of
// core it spans where the device splits cube and vector cores, so the program reads as the
// narrowing it is.
int32_t group_for(Launch& launch, const std::vector<int32_t>& cores, const CoreLayout& layout) {
  for (size_t g = 0; g < launch.groups.size(); ++g)
    if (launch.groups[g].cores == cores) return static_cast<int32_t>(g);
  if (launch.groups.size() >= static_cast<size_t>(kMaxBarrierGroups)) return -1;
  std::string name;
  if (layout.cube_cores > 0) {
    const bool all_cube = cores.back() < layout.cube_cores;
    const bool all_vector = cores.front() >= layout.cube_cores;
    if (all_cube && static_cast<int32_t>(cores.size()) == layout.cube_cores) name = "cube";
    if (all_vector && static_cast<int32_t>(cores.size()) == layout.num_cores - layout.cube_cores) name = "vector";
  }
  if (name.empty()) {
    name = "cores";
    for (int32_t c : cores) name += "_" + std::to_string(c);
  }
  launch.groups.push_back({name, cores});
  return static_cast<int32_t>(launch.groups.size() - 1);
}

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

  const int early_start = effective_early_start(ctx, seg);
  const bool by_cost = effective_sync_choice(ctx, seg) == SyncChoice::kCost;
  std::vector<Task> tasks;
  for (int32_t i : seg.ops) {
    const PlanOp& op = plan.ops[i];
    if (op.tiling_sink) tasks.push_back({i, TaskKind::kTiling, {op.cores[0]}});
    if (early_start >= 1 && op.kernel->desc->prologue) tasks.push_back({i, TaskKind::kPrologue, op.cores});
    tasks.push_back({i, TaskKind::kRun, op.cores});
  }
  Launch launch = make_launch("segment " + std::to_string(seg.id) + " (scope " + seg.scope_label + ")", n_cores);
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
  std::vector<std::vector<GroupBarrier>> barriers(n_cores);
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
    for (int32_t local = 0; local < n; ++local) {
      const int32_t id = op.local_id(local);
      if (task.kind == TaskKind::kTiling) {
        collect_tiling_access(op, acc[local]);
      } else if (task.kind == TaskKind::kPrologue) {
        collect_prologue_access(op, id, acc[local]);
      } else {
        SK_RETURN_IF_ERROR(collect_core_access(op, id, op.local_count(), acc[local]));
      }
    }

    // Each core waits for the newest conflicting op (RAW, WAR, WAW) of every other core, unless
    // its vector clock shows it already knows that op finished (transitively).
    const auto deps = event_deps.find(task.op_index);
    std::vector<std::vector<std::pair<int32_t, int32_t>>> needs(n);  // per local core: (producer, core)
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
      // Events order the consumer after every core of the op recorded before the event (a
      // prologue reads no input, so events do not hold it back).
      if (deps != event_deps.end() && task.kind != TaskKind::kPrologue)
        for (const EventDep* dep : deps->second) {
          const int32_t producer = run_position.at(dep->producer);
          for (int32_t p : tasks[producer].cores)
            if (p != c && producer > vc[c][p]) need.push_back({producer, p});
        }
      std::sort(need.rbegin(), need.rend());
      // Drop the producers an earlier (newer) wait of the list already makes known.
      std::vector<int32_t> clock = vc[c];
      for (const auto& [producer, p] : need) {
        if (producer <= clock[p]) continue;
        needs[local].push_back({producer, p});
        const std::vector<int32_t>& theirs = snapshot.at(snap_key(p, producer));
        for (int32_t q = 0; q < n_cores; ++q) clock[q] = std::max(clock[q], theirs[q]);
      }
    }

    // sync_choice=cost: where every core of the task must wait for every other one (an all-to-all
    // boundary), one barrier over exactly those cores does it with one arrival per core instead of
    // a signal and n-1 waits, and the producers need no SIGNAL for it.
    bool all_to_all = by_cost && n >= 2;
    for (int32_t local = 0; local < n && all_to_all; ++local) {
      std::vector<int32_t> waited;
      for (const auto& pc : needs[local]) waited.push_back(pc.second);
      std::sort(waited.begin(), waited.end());
      waited.erase(std::unique(waited.begin(), waited.end()), waited.end());
      std::vector<int32_t> others;
      for (int32_t c : task.cores)
        if (c != task.cores[local]) others.push_back(c);
      std::sort(others.begin(), others.end());
      all_to_all = waited == others;
    }
    int32_t group = -1;
    if (all_to_all) {
      std::vector<int32_t> members = task.cores;
      std::sort(members.begin(), members.end());
      group = group_for(launch, members, ctx.layout);
    }
    if (group >= 0) {
      // Arriving after its earlier steps, each member learns everything every member did before.
      std::vector<int32_t> merged(n_cores, -1);
      for (int32_t c : task.cores)
        for (int32_t q = 0; q < n_cores; ++q) merged[q] = std::max(merged[q], vc[c][q]);
      for (int32_t c : task.cores) {
        vc[c] = merged;
        barriers[c].push_back({pos, group});
      }
    } else {
      for (int32_t local = 0; local < n; ++local) {
        const int32_t c = task.cores[local];
        for (const auto& [producer, p] : needs[local]) {
          waits[c].push_back({pos, p, producer});
          signal_needed[p][producer] = 1;
          const std::vector<int32_t>& theirs = snapshot.at(snap_key(p, producer));
          for (int32_t q = 0; q < n_cores; ++q) vc[c][q] = std::max(vc[c][q], theirs[q]);
        }
      }
    }
    // Cross-stream sync points, for explain.
    for (int32_t local = 0; local < n; ++local)
      for (const auto& [producer, p] : needs[local]) {
        const int32_t from = tasks[producer].op_index;
        if (stream_of(from) == stream_of(task.op_index) ||
            std::find(synced.begin(), synced.end(), std::pair{task.op_index, from}) != synced.end())
          continue;
        synced.push_back({task.op_index, from});
        std::string why = ": data";
        if (deps != event_deps.end())
          for (const EventDep* dep : deps->second)
            if (dep->producer == from) why = ": event '" + ctx.graph.event_name(dep->event) + "'";
        sync_points.push_back(op_on_stream(ctx, task.op_index) + " waits for " + op_on_stream(ctx, from) + why);
      }
    for (int32_t local = 0; local < n; ++local) {
      const int32_t c = task.cores[local];
      for (const Range& r : acc[local].reads) reads[c].paint(r.first, r.second, pos);
      for (const Range& r : acc[local].writes) writes[c].paint(r.first, r.second, pos);
    }
    // A sync_all inside the kernel (idle cores fed) is a barrier every core passes after its
    // earlier ops.
    const bool is_run = task.kind == TaskKind::kRun;
    if (is_run && uses_sync_all(op)) merge_all();
    if (is_run) run_position[task.op_index] = pos;
    for (int32_t c : task.cores) {
      vc[c][c] = pos;
      snapshot[snap_key(c, pos)] = vc[c];
    }
    if (sync_every && is_run) merge_all();
  }

  // Number each core's signals, then emit the per-core programs.
  std::vector<std::vector<int32_t>> signal_index(n_cores, std::vector<int32_t>(n_tasks, 0));
  for (int32_t p = 0; p < n_cores; ++p) {
    int32_t count = 0;
    for (int32_t pos = 0; pos < n_tasks; ++pos)
      if (signal_needed[p][pos]) signal_index[p][pos] = ++count;
  }
  launch.segment = seg.id;
  launch.ops = seg.ops;
  launch.profile = seg.options.profiling == 1;
  std::vector<size_t> cursor(n_cores, 0), barrier_cursor(n_cores, 0);
  for (int32_t pos = 0; pos < n_tasks; ++pos) {
    const Task& task = tasks[pos];
    const int32_t op_index = task.op_index;
    const PlanOp& op = plan.ops[op_index];
    const sk_kernel_desc* d = op.kernel->desc;
    for (int32_t c = 0; c < n_cores; ++c) {
      std::vector<Instr>& out = launch.cores[c].instrs;
      auto it = std::find(task.cores.begin(), task.cores.end(), c);
      if (it != task.cores.end()) {
        for (; barrier_cursor[c] < barriers[c].size() && barriers[c][barrier_cursor[c]].position == pos;
             ++barrier_cursor[c])
          out.push_back({Opcode::kBarrier, barriers[c][barrier_cursor[c]].group, 0, 0});
        for (; cursor[c] < waits[c].size() && waits[c][cursor[c]].position == pos; ++cursor[c]) {
          const Wait& w = waits[c][cursor[c]];
          out.push_back({Opcode::kWait, w.core, signal_index[w.core][w.producer], 0});
        }
        const int32_t local = op.local_id(static_cast<int32_t>(it - task.cores.begin()));
        const int32_t n = op.local_count();
        if (task.kind == TaskKind::kTiling) {
          out.push_back({Opcode::kTiling, op_index, 0, 0});
        } else if (task.kind == TaskKind::kPrologue) {
          out.push_back({Opcode::kPrologue, op_index, local, n});
        } else {
          if (d->prologue && early_start == 0) out.push_back({Opcode::kPrologue, op_index, local, n});
          out.push_back({Opcode::kRun, op_index, local, n});
        }
        if (signal_needed[c][pos]) out.push_back({Opcode::kSignal, 0, signal_index[c][pos], 0});
      } else if (task.kind == TaskKind::kRun && uses_sync_all(op)) {
        for (uint32_t k = 0; k < d->sync_all_count; ++k) out.push_back({Opcode::kBarrier, 0, 0, 0});
      }
      if (sync_every && task.kind == TaskKind::kRun && pos + 1 < n_tasks) out.push_back({Opcode::kBarrier, 0, 0, 0});
    }
  }
  return launch;
}

// early_start=2: the PROLOGUEs a segment launch's cores run first (before any wait or run) move
// to the end of the launch before it, so each core warms up for the next super kernel as soon as
// it has finished its part of the current one, while the slowest core is still running. Only
// prologues that touch no workspace move: the workspace's bytes may belong to the current launch.
void hoist_prologues_across_launches(CompileContext& ctx, Program& prog) {
  const Plan& plan = *ctx.plan;
  for (size_t s = 1; s < prog.steps.size(); ++s) {
    if (prog.steps[s - 1].kind != Step::Kind::kLaunch || prog.steps[s].kind != Step::Kind::kLaunch) continue;
    Launch& next = prog.launches[prog.steps[s].index];
    if (next.segment < 0 || effective_early_start(ctx, ctx.segments[next.segment]) < 2) continue;
    Launch& prev = prog.launches[prog.steps[s - 1].index];
    for (int32_t c = 0; c < std::min(prev.num_cores, next.num_cores); ++c) {
      std::vector<Instr>& instrs = next.cores[c].instrs;
      size_t k = 0;
      while (k < instrs.size() && instrs[k].op == Opcode::kPrologue && plan.ops[instrs[k].a].workspace_bytes == 0 &&
             !plan.ops[instrs[k].a].tiling_sink)
        ++k;
      for (size_t i = 0; i < k; ++i) {
        prev.cores[c].instrs.push_back(instrs[i]);
        if (std::find(prev.early_ops.begin(), prev.early_ops.end(), instrs[i].a) == prev.early_ops.end())
          prev.early_ops.push_back(instrs[i].a);
      }
      instrs.erase(instrs.begin(), instrs.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
}

// A PROLOGUE not directly followed by its op's RUN runs ahead of something the core would otherwise
// idle in (waits, other steps, the end of the launch before): kernels may then warm more.
void mark_prologues_ahead(Program& prog) {
  for (Launch& l : prog.launches)
    for (CoreProgram& cp : l.cores)
      for (size_t i = 0; i < cp.instrs.size(); ++i) {
        Instr& in = cp.instrs[i];
        if (in.op != Opcode::kPrologue) continue;
        const bool attached = i + 1 < cp.instrs.size() && cp.instrs[i + 1].op == Opcode::kRun &&
                              cp.instrs[i + 1].a == in.a && cp.instrs[i + 1].b == in.b;
        in.flags = static_cast<uint8_t>(attached ? in.flags & ~kInstrAhead : in.flags | kInstrAhead);
      }
}

// What each segment's launch synchronises with, for explain: one pass over the program.
struct ScheduleCounts {
  int waits = 0, signals = 0, barriers = 0;
  int ahead = 0;    // prologues that run ahead of their op's waits
  int hoisted = 0;  // of which in the launch before (early start level 2)
};

std::vector<ScheduleCounts> count_schedules(const CompileContext& ctx, const Program& prog) {
  std::vector<ScheduleCounts> counts(ctx.segments.size());
  for (const Launch& l : prog.launches)
    for (const CoreProgram& cp : l.cores)
      for (const Instr& in : cp.instrs) {
        if (in.op == Opcode::kPrologue && (in.flags & kInstrAhead) && ctx.op_segment[in.a] >= 0) {
          ScheduleCounts& owner = counts[ctx.op_segment[in.a]];
          ++owner.ahead;
          owner.hoisted += l.segment != ctx.op_segment[in.a];
        }
        if (l.segment < 0) continue;
        ScheduleCounts& c = counts[l.segment];
        c.waits += in.op == Opcode::kWait;
        c.signals += in.op == Opcode::kSignal;
        c.barriers += in.op == Opcode::kBarrier;
      }
  return counts;
}

std::string describe_schedule(const CompileContext& ctx, const Segment& seg, const ScheduleCounts& c) {
  std::string out = "early-start=" + std::to_string(effective_early_start(ctx, seg)) +
                    " sync-choice=" + sync_choice_name(effective_sync_choice(ctx, seg)) + ": " +
                    std::to_string(c.waits) + " waits, " + std::to_string(c.signals) + " signals, " +
                    std::to_string(c.barriers) + " barriers";
  if (c.ahead > c.hoisted) out += ", " + std::to_string(c.ahead - c.hoisted) + " prologues ahead of their run";
  if (c.hoisted > 0) out += ", " + std::to_string(c.hoisted) + " prologues in the launch before";
  return out;
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

  hoist_prologues_across_launches(ctx, prog);
  mark_prologues_ahead(prog);
  const std::vector<ScheduleCounts> schedule_counts = count_schedules(ctx, prog);

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
    for (int32_t i : seg.ops) {
      const PlanOp& op = plan.ops[i];
      if (!is_communication_kernel(op.kernel_name)) continue;
      std::string line = "op '" + op.name + "' (" + op.kernel_name + ") on core " + std::to_string(op.cores.front());
      r.collectives.push_back(line + " (stream '" + ctx.graph.stream_name(ctx.graph.op(op.graph_op).stream) + "')");
    }
    r.schedule = describe_schedule(ctx, seg, schedule_counts[seg.id]);
    ctx.report.segments.push_back(std::move(r));
  }
  for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i)
    if (ctx.op_segment[i] < 0 && (plan.ops[i].is_kernel() || plan.ops[i].kind == OpKind::kHost))
      ctx.report.unfused.push_back({i, ctx.op_unfused[i]});
  return Status::ok();
}

}  // namespace sk
