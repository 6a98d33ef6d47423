#include "compiler/recompute.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <unordered_map>

#include "compiler/access_ranges.h"
#include "compiler/interval_map.h"

namespace sk {
namespace {

// A cheap op to recompute: its consumers in the segment, and the cores its copies run on.
struct Decision {
  int32_t op = -1;
  std::vector<int32_t> consumers;
  std::vector<int32_t> cores;
};

// Per plan op, what the decisions so far made of it.
struct Rewrites {
  std::vector<std::vector<int32_t>> reads_copies;  // the recomputed ops whose per-core copies it reads
  std::vector<std::vector<int32_t>> copy_cores;    // recomputed: the cores its copies run on
};

bool cheap_row_wise(const PlanOp& op) {
  return op.is_kernel() && std::find(std::begin(kCheapRowWiseKernels), std::end(kCheapRowWiseKernels),
                                     op.kernel_name) != std::end(kCheapRowWiseKernels);
}

// Why `op` cannot become one plan op per core, or "".
std::string unsplittable(const PlanOp& op) {
  const sk_kernel_desc* d = op.kernel->desc;
  if (!d->access) return "has no access callback";
  if (op.tiling_sink) return "is a tiling sink";
  if (op.workspace_bytes > 0) return "has a workspace";
  if (d->flags & SK_USES_SYNC_ALL) return "calls sync_all";
  if (d->flags & SK_SYNCS_CORES) return "syncs its cores";
  return "";
}

// Why recompute is off for the whole segment, or "".
std::string off_reason(const CompileContext& ctx, const Segment& seg) {
  if (seg.options.recompute == 0) return "scope option recompute=0";
  if (seg.options.recompute < 0 && !ctx.options.super_kernel_optimize_options.recompute)
    return "option super_kernel_optimize_options.recompute=false";
  if (ctx.options.dump) return "the data dump compares outputs op by op";
  if (ctx.options.super_kernel_debug_options.debug_cross_core_sync_check)
    return "debug_cross_core_sync_check runs the plan op by op";
  if (seg.options.debug_aic_num >= 0 || seg.options.debug_aiv_num >= 0)
    return "debug-aic-num / debug-aiv-num cap the cores";
  if (seg.options.debug_sync_all == 1 || ctx.options.super_kernel_debug_options.debug_sync_all)
    return "debug-sync-all puts a barrier after every op";
  return "";
}

uint64_t bytes_touched(const CoreAccess& a) {
  uint64_t bytes = 0;
  for (const ByteRange& r : a.reads) bytes += r.second - r.first;
  for (const ByteRange& r : a.writes) bytes += r.second - r.first;
  return bytes;
}

bool overlap(const std::vector<ByteRange>& a, const std::vector<ByteRange>& b) {
  for (const ByteRange& x : a)
    for (const ByteRange& y : b)
      if (x.first < y.second && y.first < x.second) return true;
  return false;
}

std::string cost_text(uint64_t bytes, double ns) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "+%llu bytes, about %.0f ns on the critical path",
                static_cast<unsigned long long>(bytes), ns);
  return buf;
}

std::string core_list(const std::vector<int32_t>& cores) {
  std::string s;
  for (int32_t c : cores) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

// Decides, op by op, which cheap ops of one segment to recompute (see recompute.h).
class SegmentDecider {
 public:
  SegmentDecider(const CompileContext& ctx, Segment& seg, const std::vector<std::vector<int32_t>>& readers,
                 const std::vector<std::vector<int32_t>>& writers, Rewrites& rewrites)
      : ctx_(ctx), plan_(*ctx.plan), seg_(seg), readers_(readers), writers_(writers), rewrites_(rewrites) {
    for (int32_t i : seg.ops)
      for (int32_t c : plan_.ops[i].cores) n_cores_ = std::max(n_cores_, c + 1);
    writes_.resize(n_cores_);
  }

  Status run(std::vector<Decision>& chosen) {
    if (n_cores_ < 2 ||
        std::none_of(seg_.ops.begin(), seg_.ops.end(), [&](int32_t i) { return cheap_row_wise(plan_.ops[i]); }))
      return Status::ok();  // nothing to decide
    if (const std::string off = off_reason(ctx_, seg_); !off.empty()) {
      seg_.recompute.push_back("off: " + off);
      return Status::ok();
    }
    for (int32_t pos = 0; pos < static_cast<int32_t>(seg_.ops.size()); ++pos) {
      const int32_t i = seg_.ops[pos];
      const PlanOp& op = plan_.ops[i];
      const std::vector<CoreAccess>* acc = nullptr;
      SK_RETURN_IF_ERROR(access(i, acc));
      if (cheap_row_wise(op)) {
        Decision d;
        auto why = decide(i, *acc, d);
        if (!why) return why.status();
        const std::string label = "op '" + op.name + "' (" + op.kernel_name + "): ";
        if (d.op >= 0) {
          for (int32_t c : d.consumers) rewrites_.reads_copies[c].push_back(i);
          rewrites_.copy_cores[i] = d.cores;
          chosen.push_back(std::move(d));
          seg_.recompute.push_back(label + "recomputed " + *why);
        } else {
          seg_.recompute.push_back(label + "not recomputed: " + *why);
        }
      }
      for (size_t local = 0; local < op.cores.size(); ++local)
        for (const ByteRange& w : (*acc)[local].writes) writes_[op.cores[local]].paint(w.first, w.second, pos);
    }
    return Status::ok();
  }

 private:
  // Per core of `op` (kernel-local order), what it reads and writes; computed once per op.
  Status access(int32_t i, const std::vector<CoreAccess>*& out) {
    auto it = access_.find(i);
    if (it == access_.end()) {
      const PlanOp& op = plan_.ops[i];
      const int32_t n = static_cast<int32_t>(op.cores.size());
      std::vector<CoreAccess> acc(n);
      for (int32_t local = 0; local < n; ++local) SK_RETURN_IF_ERROR(collect_core_access(op, local, n, acc[local]));
      it = access_.emplace(i, std::move(acc)).first;
    }
    out = &it->second;
    return Status::ok();
  }

  int32_t root_of(int32_t id) const {
    return plan_.tensors[id].kind == TensorKind::kView ? plan_.tensors[id].base : id;
  }
  int32_t stream_of(int32_t i) const { return ctx_.graph.op(plan_.ops[i].graph_op).stream; }
  bool ordered_by_event(int32_t i) const {
    return std::any_of(seg_.event_deps.begin(), seg_.event_deps.end(),
                       [&](const EventDep& e) { return e.consumer == i || e.producer == i; });
  }

  // Fills `consumers` with the in-segment readers of op `i`'s output; returns "" when each of them
  // can read a per-core copy, else why not.
  std::string consumers_of(int32_t i, std::vector<int32_t>& consumers) const {
    const PlanOp& x = plan_.ops[i];
    const int32_t out = x.output_ids[0];
    for (int32_t w : writers_[out])
      if (w != i) return "op '" + plan_.ops[w].name + "' also writes its output";
    for (int32_t r : readers_[out]) {
      const PlanOp& reader = plan_.ops[r];
      const std::string name = "op '" + reader.name + "'";
      if (stream_of(r) != stream_of(i))
        return "its output is read by " + name + " on stream '" + ctx_.graph.stream_name(stream_of(r)) + "'";
      if (ctx_.op_segment[r] != seg_.id) continue;  // reads X's own output tensor after the launch
      if (r < i) return name + " reads its output before it is written";
      for (int32_t id : reader.input_ids)
        if (root_of(id) == out && id != out) return name + " reads its output through a view";
      if (const std::string u = unsplittable(reader); !u.empty()) return "its consumer " + name + " " + u;
      if (ordered_by_event(r)) return "an event orders its consumer " + name;
      consumers.push_back(r);
    }
    return consumers.empty() ? "no op of the segment reads its output" : "";
  }

  // Whether op `i` (whose cores access `xa`) is to be recomputed: fills `d` if so; returns why (not).
  Expected<std::string> decide(int32_t i, const std::vector<CoreAccess>& xa, Decision& d) {
    const PlanOp& x = plan_.ops[i];
    if (const std::string u = unsplittable(x); !u.empty()) return std::string("it " + u);
    if (x.outputs.size() != 1) return std::string("it has " + std::to_string(x.outputs.size()) + " outputs");
    const int32_t out = x.output_ids[0];
    if (plan_.tensors[out].kind != TensorKind::kIntermediate)
      return std::string(std::string("its output is a ") + tensor_kind_name(plan_.tensors[out].kind) +
                         ", not an intermediate of its own");
    for (int32_t id : x.input_ids)
      if (root_of(id) == out) return std::string("it writes in place");
    if (ordered_by_event(i)) return std::string("an event orders it");
    std::vector<int32_t> consumers;
    if (std::string why = consumers_of(i, consumers); !why.empty()) return why;

    // The sync after X: a consumer core reads bytes of X's output another core wrote.
    bool sync_after = false;
    std::vector<int32_t> cores;
    for (int32_t c_op : consumers) {
      const std::vector<CoreAccess>* ca = nullptr;
      SK_RETURN_IF_ERROR(access(c_op, ca));
      const PlanOp& consumer = plan_.ops[c_op];
      for (size_t l = 0; l < consumer.cores.size(); ++l) {
        const int32_t c = consumer.cores[l];
        if (std::find(cores.begin(), cores.end(), c) == cores.end()) cores.push_back(c);
        for (size_t xl = 0; xl < x.cores.size(); ++xl)
          sync_after |= x.cores[xl] != c && overlap((*ca)[l].reads, xa[xl].writes);
      }
    }
    if (!sync_after)
      return std::string("its consumers read only what their own core wrote: no sync after it to remove");

    // An op reading the copies of a recomputed op runs whole on each core from that core's copies,
    // which must exist wherever its consumers run.
    for (int32_t from : rewrites_.reads_copies[i])
      for (int32_t c : cores)
        if (!std::count(rewrites_.copy_cores[from].begin(), rewrites_.copy_cores[from].end(), c))
          return "its consumers run on core " + std::to_string(c) + ", where recomputed op '" + plan_.ops[from].name +
                 "' has no copy";

    // The sync before X: run whole, X reads what every producer core wrote. That removes a sync
    // only if X's input comes from before the segment or from per-core copies (no wait at all), or
    // X already waits for another core.
    CoreAccess whole;
    SK_RETURN_IF_ERROR(collect_core_access(x, 0, 1, whole));
    std::vector<ByteRange> copies;  // the recomputed outputs X reads: each core will read its own copy
    for (int32_t from : rewrites_.reads_copies[i]) copies.push_back(operand_extent(plan_.ops[from].outputs[0]));
    bool produced_here = false, waits_already = false;
    for (int32_t p = 0; p < n_cores_; ++p)
      for (const ByteRange& r : whole.reads)
        produced_here |= !overlap({r}, copies) && writes_[p].latest(r.first, r.second) >= 0;
    for (size_t xl = 0; xl < x.cores.size(); ++xl)
      for (int32_t p = 0; p < n_cores_; ++p)
        if (p != x.cores[xl])
          for (const ByteRange& r : xa[xl].reads)
            waits_already |= !overlap({r}, copies) && writes_[p].latest(r.first, r.second) >= 0;
    if (produced_here && !waits_already)
      return std::string("no core waits for another before it: recomputing would move the sync, not remove it");

    // Cost: what the whole op touches beyond the busiest core's slice lengthens the critical path.
    uint64_t busiest = 0;
    for (const CoreAccess& a : xa) busiest = std::max(busiest, bytes_touched(a));
    const uint64_t extra = bytes_touched(whole) - std::min(bytes_touched(whole), busiest);
    const double ns = static_cast<double>(extra) / kRecomputeBytesPerNs;
    char sync[64];
    std::snprintf(sync, sizeof sync, "%.0f ns per sync removed", kRecomputeSyncNs);
    if (ns > kRecomputeSyncNs) return std::string("too costly (" + cost_text(extra, ns) + " > " + sync + ")");

    std::sort(cores.begin(), cores.end());
    std::string readers;
    for (int32_t c_op : consumers) readers += (readers.empty() ? "'" : ", '") + plan_.ops[c_op].name + "'";
    std::string why = "on cores " + core_list(cores) + ", each into its own copy; " + readers + " read" +
                      (consumers.size() == 1 ? "s" : "") + " it without a sync (" + cost_text(extra, ns) + " < " +
                      sync + ")";
    d.op = i;
    d.consumers = std::move(consumers);
    d.cores = std::move(cores);
    return why;
  }

  const CompileContext& ctx_;
  const Plan& plan_;
  Segment& seg_;
  const std::vector<std::vector<int32_t>>& readers_;
  const std::vector<std::vector<int32_t>>& writers_;
  Rewrites& rewrites_;
  int32_t n_cores_ = 1;
  std::vector<IntervalMap> writes_;  // per core: the segment position of the last op writing a byte
  std::unordered_map<int32_t, std::vector<CoreAccess>> access_;
};

// Rewrites the plan for the chosen ops: per-core copies of each recomputed op, per-core slices of
// each consumer reading its core's copies, and the execution order of the added ops.
void rewrite(CompileContext& ctx, const std::vector<Decision>& chosen, const Rewrites& rewrites) {
  Plan& plan = *ctx.plan;
  const int32_t n_orig = static_cast<int32_t>(plan.ops.size());
  std::vector<std::vector<int32_t>> beside(n_orig);  // added ops that run right after op i
  ctx.inputs_live_until.assign(n_orig, -1);
  auto append = [&](PlanOp op, int32_t after) {
    const int32_t index = static_cast<int32_t>(plan.ops.size());
    plan.ops.push_back(std::move(op));
    beside[after].push_back(index);
    ctx.op_segment.push_back(ctx.op_segment[after]);
    ctx.op_unfused.push_back(ctx.op_unfused[after]);
    ctx.inputs_live_until.push_back(-1);
    return index;
  };
  auto on_core = [](const std::string& name, int32_t c) { return name + "@core" + std::to_string(c); };

  std::map<std::pair<int32_t, int32_t>, int32_t> copy_of;  // (recomputed output, core) -> tensor
  // Op `i` as run on core `c`: the recomputed outputs it reads replaced by that core's copies.
  auto read_copies = [&](PlanOp& op, int32_t i, int32_t c) {
    for (int32_t from : rewrites.reads_copies[i])
      for (int32_t& id : op.input_ids)
        if (id == plan.ops[from].output_ids[0]) id = copy_of.at({id, c});
  };
  for (const Decision& d : chosen) {
    const int32_t out = plan.ops[d.op].output_ids[0];
    copy_of[{out, d.cores[0]}] = out;  // the first core writes the op's own output
    for (size_t k = 1; k < d.cores.size(); ++k) {
      const int32_t c = d.cores[k];
      TensorInfo t = plan.tensors[out];
      t.name = on_core(t.name, c);
      t.is_output = false;
      t.output_name.clear();
      const int32_t id = static_cast<int32_t>(plan.tensors.size());
      plan.tensors.push_back(std::move(t));
      copy_of[{out, c}] = id;
      PlanOp copy = plan.ops[d.op];
      copy.name = on_core(copy.name, c);
      copy.cores = {c};
      copy.output_ids[0] = id;
      copy.outputs[0] = make_tensor_arg(plan.tensors[id]);
      read_copies(copy, d.op, c);
      append(std::move(copy), d.op);
    }
    plan.ops[d.op].cores = {d.cores[0]};
    read_copies(plan.ops[d.op], d.op, d.cores[0]);
  }
  // Every other consumer runs its slice on each of its cores, from that core's copies.
  for (int32_t c_op = 0; c_op < n_orig; ++c_op) {
    if (rewrites.reads_copies[c_op].empty() || !rewrites.copy_cores[c_op].empty()) continue;
    const PlanOp whole = plan.ops[c_op];
    const int32_t n = static_cast<int32_t>(whole.cores.size());
    for (int32_t l = 0; l < n; ++l) {
      const int32_t c = whole.cores[l];
      PlanOp slice = whole;
      slice.cores = {c};
      slice.split_local = l;
      slice.split_count = n;
      read_copies(slice, c_op, c);
      if (l == 0) {
        plan.ops[c_op] = std::move(slice);
      } else {
        slice.name = on_core(slice.name, c);
        append(std::move(slice), c_op);
      }
    }
  }
  // A recomputed op's inputs are read on every core until its last consumer slice.
  for (const Decision& d : chosen) {
    const int32_t last_consumer = *std::max_element(d.consumers.begin(), d.consumers.end());
    const int32_t until = beside[last_consumer].empty() ? last_consumer : beside[last_consumer].back();
    ctx.inputs_live_until[d.op] = until;
    for (int32_t copy : beside[d.op]) ctx.inputs_live_until[copy] = until;
  }

  ctx.op_order.clear();
  for (int32_t i = 0; i < n_orig; ++i) {
    ctx.op_order.push_back(i);
    ctx.op_order.insert(ctx.op_order.end(), beside[i].begin(), beside[i].end());
  }
  for (Segment& seg : ctx.segments) {
    std::vector<int32_t> ops;
    for (int32_t i : seg.ops) {
      ops.push_back(i);
      ops.insert(ops.end(), beside[i].begin(), beside[i].end());
    }
    seg.ops = std::move(ops);
  }
}

}  // namespace

Status recompute_ops(CompileContext& ctx) {
  const Plan& plan = *ctx.plan;
  const size_t n_tensors = plan.tensors.size();
  std::vector<std::vector<int32_t>> readers(n_tensors), writers(n_tensors);  // by root tensor
  auto root_of = [&](int32_t id) { return plan.tensors[id].kind == TensorKind::kView ? plan.tensors[id].base : id; };
  for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i) {
    for (int32_t id : plan.ops[i].input_ids)
      if (readers[root_of(id)].empty() || readers[root_of(id)].back() != i) readers[root_of(id)].push_back(i);
    for (int32_t id : plan.ops[i].output_ids)
      if (writers[root_of(id)].empty() || writers[root_of(id)].back() != i) writers[root_of(id)].push_back(i);
  }
  Rewrites rewrites{std::vector<std::vector<int32_t>>(plan.ops.size()),
                    std::vector<std::vector<int32_t>>(plan.ops.size())};
  std::vector<Decision> chosen;
  for (Segment& seg : ctx.segments)
    SK_RETURN_IF_ERROR(SegmentDecider(ctx, seg, readers, writers, rewrites).run(chosen));
  if (!chosen.empty()) rewrite(ctx, chosen, rewrites);
  return Status::ok();
}

}  // namespace sk
