#include "compiler/memory_plan.h"

#include <algorithm>

namespace sk {
namespace {

constexpr int64_t kAlign = 64;
int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Buffer {
  int64_t bytes = 0;
  int32_t first = 0;
  int32_t last = 0;
  int32_t tensor = -1;  // or -1 for a workspace
  int32_t op = -1;      // workspace owner
  int64_t offset = -1;
  std::vector<int32_t> streams;  // sorted streams of the ops that touch it (with op_stream given)
};

bool lifetimes_overlap(const Buffer& a, const Buffer& b) { return a.first <= b.last && b.first <= a.last; }
bool may_share_bytes(const Buffer& a, const Buffer& b) { return !lifetimes_overlap(a, b) && a.streams == b.streams; }

}  // namespace

void plan_memory(Plan& plan, const MemoryPlanOptions& options) {
  const int32_t n_ops = static_cast<int32_t>(plan.ops.size());
  const int32_t end = std::max(n_ops - 1, 0);
  const size_t n_t = plan.tensors.size();
  auto root_of = [&](int32_t id) { return plan.tensors[id].kind == TensorKind::kView ? plan.tensors[id].base : id; };

  std::vector<int32_t> position(n_ops);  // per plan op: its place in the execution order
  for (int32_t i = 0; i < n_ops; ++i) position[options.order.empty() ? i : options.order[i]] = i;
  std::vector<int32_t> first(n_t, -1), last(n_t, -1);
  auto touch = [&](int32_t root, int32_t op) {
    if (first[root] < 0 || op < first[root]) first[root] = op;
    last[root] = std::max(last[root], op);
  };
  std::vector<std::vector<int32_t>> streams(n_t);
  auto add_stream = [&](std::vector<int32_t>& v, int32_t op) {
    if (options.op_stream.empty()) return;
    const int32_t s = options.op_stream[op];
    if (std::find(v.begin(), v.end(), s) == v.end()) v.insert(std::upper_bound(v.begin(), v.end(), s), s);
  };
  for (int32_t i = 0; i < n_ops; ++i) {
    const int32_t at = position[i];
    const int32_t until = options.inputs_live_until.empty() || options.inputs_live_until[i] < 0
                              ? at
                              : position[options.inputs_live_until[i]];
    for (int32_t id : plan.ops[i].input_ids)
      touch(root_of(id), at), touch(root_of(id), until), add_stream(streams[root_of(id)], i);
    for (int32_t id : plan.ops[i].output_ids) touch(root_of(id), at), add_stream(streams[root_of(id)], i);
  }
  for (size_t i = 0; i < n_t; ++i)
    if (plan.tensors[i].is_output) last[root_of(static_cast<int32_t>(i))] = end;

  std::vector<Buffer> buffers;
  int64_t variable_bytes = 0;
  for (size_t i = 0; i < n_t; ++i) {
    const TensorInfo& t = plan.tensors[i];
    if (t.kind == TensorKind::kView || t.kind == TensorKind::kConstant) continue;
    if (t.kind == TensorKind::kVariable) {
      variable_bytes += t.storage_bytes;
      continue;
    }
    Buffer b;
    b.bytes = align_up(std::max<int64_t>(t.storage_bytes, 1));
    b.tensor = static_cast<int32_t>(i);
    b.streams = streams[i];
    if (t.kind == TensorKind::kInput) {
      b.first = 0;
      b.last = end;
    } else {
      b.first = first[i] < 0 ? 0 : first[i];
      b.last = last[i] < 0 ? b.first : last[i];
    }
    buffers.push_back(b);
  }
  for (int32_t i = 0; i < n_ops; ++i) {
    if (plan.ops[i].workspace_arena_bytes() == 0) continue;
    Buffer b;
    b.bytes = align_up(static_cast<int64_t>(plan.ops[i].workspace_arena_bytes()));
    b.first = b.last = position[i];
    b.op = i;
    add_stream(b.streams, i);
    buffers.push_back(b);
  }

  int64_t arena = 0;
  int64_t unplanned = 0;
  for (const Buffer& b : buffers) unplanned += b.bytes;
  if (!options.reuse) {
    for (Buffer& b : buffers) {
      b.offset = arena;
      arena += b.bytes;
    }
  } else {
    std::vector<size_t> order(buffers.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
      return buffers[a].first < buffers[b].first;
    });
    std::vector<size_t> placed;
    std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of conflicting buffers
    for (size_t idx : order) {
      Buffer& b = buffers[idx];
      busy.clear();
      for (size_t p : placed)
        if (!may_share_bytes(b, buffers[p])) busy.push_back({buffers[p].offset, buffers[p].offset + buffers[p].bytes});
      std::sort(busy.begin(), busy.end());
      int64_t candidate = 0;
      for (const auto& [lo, hi] : busy) {
        if (candidate + b.bytes <= lo) break;
        candidate = std::max(candidate, hi);
      }
      b.offset = candidate;
      arena = std::max(arena, candidate + b.bytes);
      placed.push_back(idx);
    }
  }

  // Lower bound: the most bytes live at any op.
  int64_t peak = 0;
  for (int32_t i = 0; i <= end; ++i) {
    int64_t live = 0;
    for (const Buffer& b : buffers)
      if (b.first <= i && i <= b.last) live += b.bytes;
    peak = std::max(peak, live);
  }

  plan.memory.offset.assign(n_t, -1);
  for (const Buffer& b : buffers) {
    if (b.tensor >= 0) plan.memory.offset[b.tensor] = b.offset;
    if (b.op >= 0) plan.ops[b.op].workspace_offset = b.offset;
  }
  plan.memory.arena_bytes = arena;
  plan.memory.peak_live_bytes = peak;
  plan.memory.unplanned_bytes = unplanned;
  plan.memory.variable_bytes = variable_bytes;
}

}  // namespace sk
