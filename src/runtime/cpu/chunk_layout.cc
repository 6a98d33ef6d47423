#include "runtime/cpu/chunk_layout.h"

#include <algorithm>
#include <utility>

namespace sk::cpu {

namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

// The ranges core `core` of `n` touches, or false when `access` fails.
bool ranges_of(const sk_kernel_desc& d, const sk_kernel_args& a, int32_t core, int32_t n,
               std::vector<sk_access_range>* out) {
  const int32_t count = d.access(&a, core, n, nullptr, 0);
  if (count < 0) return false;
  out->assign(static_cast<size_t>(count), sk_access_range{});
  const int32_t got = d.access(&a, core, n, out->data(), count);
  if (got < 0 || got > count) return false;
  out->resize(static_cast<size_t>(got));
  return true;
}

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals m;
  for (const auto& [b, e] : v) {
    if (b >= e) continue;
    if (!m.empty() && b <= m.back().second)
      m.back().second = std::max(m.back().second, e);
    else
      m.emplace_back(b, e);
  }
  return m;
}

int64_t total_bytes(const Intervals& v) {
  int64_t t = 0;
  for (const auto& [b, e] : v) t += e - b;
  return t;
}

// [b, e) lies inside one interval of the merged list `m`.
bool inside(const Intervals& m, int64_t b, int64_t e) {
  if (b >= e) return true;
  auto it = std::upper_bound(m.begin(), m.end(), std::make_pair(b, INT64_MAX));
  if (it == m.begin()) return false;
  --it;
  return it->first <= b && e <= it->second;
}

// Per operand, the merged ranges of one access mode.
std::vector<Intervals> by_operand(const std::vector<sk_access_range>& ranges, int32_t mode, int operands) {
  std::vector<Intervals> v(static_cast<size_t>(operands));
  for (const sk_access_range& r : ranges)
    if (r.mode & mode) v[static_cast<size_t>(r.operand)].emplace_back(r.begin, r.end);
  for (Intervals& i : v) i = merged(std::move(i));
  return v;
}

std::unique_ptr<ChunkLayout> refuse(std::string* why, const char* reason) {
  if (why) *why = reason;
  return nullptr;
}

}  // namespace

std::unique_ptr<ChunkLayout> build_chunk_layout(const sk_kernel_desc& desc, const sk_kernel_args& args, int32_t core_id,
                                                int32_t num_cores, int64_t chunk_bytes,
                                                const std::vector<uint8_t>& constant_inputs, std::string* why) {
  if (!(desc.flags & SK_CHUNKABLE) || !desc.access) return refuse(why, "the kernel is not SK_CHUNKABLE");
  if (desc.flags & (SK_USES_SYNC_ALL | SK_SYNCS_CORES | SK_TILING_SINK))
    return refuse(why, "the kernel syncs its cores or tiles at run time");
  if (args.workspace_size != 0) return refuse(why, "the call has a workspace");
  const int operands = args.num_inputs + args.num_outputs;
  std::vector<sk_access_range> call;
  if (!ranges_of(desc, args, core_id, num_cores, &call)) return refuse(why, "access failed");
  for (const sk_access_range& r : call)
    if (r.operand < 0 || r.operand >= operands) return refuse(why, "access named an operand out of range");
  int64_t read = 0;
  for (const sk_access_range& r : call)
    if (r.mode & SK_ACCESS_READ) read += r.end - r.begin;
  const int64_t parts =
      std::min<int64_t>({kMaxChunks, read / std::max<int64_t>(chunk_bytes, 1), INT32_MAX / std::max(num_cores, 1)});
  if (parts < 2) return refuse(why, "the call reads too little to share");
  const std::vector<Intervals> call_reads = by_operand(call, SK_ACCESS_READ, operands);
  const std::vector<Intervals> call_writes = by_operand(call, SK_ACCESS_WRITE, operands);
  int64_t written = 0;
  for (int o = 0; o < operands; ++o) {
    if (o < args.num_inputs && !call_writes[static_cast<size_t>(o)].empty())
      return refuse(why, "the call writes an input");
    written += total_bytes(call_writes[static_cast<size_t>(o)]);
  }

  auto layout = std::make_unique<ChunkLayout>();
  layout->core_id = core_id;
  layout->num_cores = num_cores;
  layout->parts = static_cast<int32_t>(parts);
  layout->writes.resize(static_cast<size_t>(parts));
  layout->spans.resize(static_cast<size_t>(parts));
  std::vector<Intervals> chunk_writes(static_cast<size_t>(operands));
  int64_t chunk_written = 0;
  size_t scratch = 0;
  std::vector<sk_access_range> ranges;
  for (int32_t j = 0; j < parts; ++j) {
    const int32_t sub = static_cast<int32_t>(core_id * parts + j);
    if (!ranges_of(desc, args, sub, static_cast<int32_t>(num_cores * parts), &ranges))
      return refuse(why, "access failed for a chunk");
    for (const sk_access_range& r : ranges) {
      if (r.operand < 0 || r.operand >= operands) return refuse(why, "access named an operand out of range");
      const auto o = static_cast<size_t>(r.operand);
      if ((r.mode & SK_ACCESS_READ) && !inside(call_reads[o], r.begin, r.end))
        return refuse(why, "a chunk reads what the call does not");
      if ((r.mode & SK_ACCESS_WRITE) && !inside(call_writes[o], r.begin, r.end))
        return refuse(why, "a chunk writes what the call does not");
    }
    const std::vector<Intervals> writes = by_operand(ranges, SK_ACCESS_WRITE, operands);
    for (int o = args.num_inputs; o < operands; ++o) {
      const Intervals& w = writes[static_cast<size_t>(o)];
      if (w.empty()) continue;
      const int32_t output = o - args.num_inputs;
      for (const auto& [b, e] : w) layout->writes[static_cast<size_t>(j)].push_back({output, b, e});
      const int64_t b = w.front().first, e = w.back().second;
      layout->spans[static_cast<size_t>(j)].push_back({output, b, e, static_cast<int64_t>(scratch)});
      scratch += (static_cast<size_t>(e - b) + 127) / 64 * 64;  // + 64 for the alignment shift
      chunk_written += total_bytes(w);
      chunk_writes[static_cast<size_t>(o)].insert(chunk_writes[static_cast<size_t>(o)].end(), w.begin(), w.end());
    }
  }
  // The chunks' writes are disjoint (their sizes add up to the call's) and cover the call's.
  int64_t covered = 0;
  for (Intervals& w : chunk_writes) covered += total_bytes(merged(std::move(w)));
  if (chunk_written != written || covered != written) return refuse(why, "the chunks do not write exactly the call");
  // Outputs scattered with large gaps (a strided view) would need scratch far beyond what is written.
  if (scratch > static_cast<size_t>(4 * written) + (1u << 20))
    return refuse(why, "the call's writes are too scattered");
  // Snapshots of the inputs that may change under a helper abandoned in a chunk: the span of the
  // call's reads (small for a GEMV's activations; a scattered view would copy too much).
  size_t snapshot = 0;
  int64_t read_changing = 0;
  for (int i = 0; i < args.num_inputs; ++i) {
    if (static_cast<size_t>(i) < constant_inputs.size() && constant_inputs[static_cast<size_t>(i)]) continue;
    const Intervals& r = call_reads[static_cast<size_t>(i)];
    if (r.empty()) continue;
    const int64_t b = r.front().first, e = r.back().second;
    layout->snapshot.push_back({i, b, e, static_cast<int64_t>(snapshot)});
    snapshot += (static_cast<size_t>(e - b) + 127) / 64 * 64;
    read_changing += total_bytes(r);
  }
  if (snapshot > static_cast<size_t>(4 * read_changing) + (1u << 20))
    return refuse(why, "the call's reads of changing inputs are too scattered");
  // One buffer: the scratch, then the two snapshots (every span a multiple of 64 bytes).
  auto storage = AlignedBuffer::allocate(scratch + 2 * snapshot, "the chunk helper's scratch");
  if (!storage) return refuse(why, "no memory for the scratch");
  layout->scratch_bytes = scratch;
  layout->snapshot_bytes = snapshot;
  layout->storage = std::move(*storage);
  layout->scratch = reinterpret_cast<std::byte*>(layout->storage.data.get());
  if (snapshot > 0) {
    layout->snapshots[0] = layout->scratch + scratch;
    layout->snapshots[1] = layout->snapshots[0] + snapshot;
  }
  return layout;
}

namespace {

// What PlanOp::chunk_layouts holds: per kernel-local core id, its layout once built.
struct OpChunkLayouts {
  int32_t num_cores = 0;
  std::vector<std::unique_ptr<ChunkLayout>> layouts;
  std::vector<bool> built;
};

}  // namespace

const ChunkLayout* chunk_layout_for(PlanOp& op, int32_t core_id, int32_t num_cores, int64_t chunk_bytes) {
  if (!op.kernel || !(op.kernel->desc->flags & SK_CHUNKABLE) || core_id < 0 || core_id >= num_cores) return nullptr;
  auto* cache = static_cast<OpChunkLayouts*>(op.chunk_layouts.get());
  // An op runs on one core count; should another appear, its calls run whole (replacing the
  // layouts could free scratch that a helper still writes).
  if (cache && cache->num_cores != num_cores) return nullptr;
  if (!cache) {
    auto fresh = std::make_shared<OpChunkLayouts>();
    fresh->num_cores = num_cores;
    fresh->layouts.resize(static_cast<size_t>(num_cores));
    fresh->built.assign(static_cast<size_t>(num_cores), false);
    cache = fresh.get();
    op.chunk_layouts = std::move(fresh);
  }
  const auto c = static_cast<size_t>(core_id);
  if (!cache->built[c]) {
    cache->layouts[c] =
        build_chunk_layout(*op.kernel->desc, op.args, core_id, num_cores, chunk_bytes, op.constant_inputs);
    cache->built[c] = true;
  }
  return cache->layouts[c].get();
}

}  // namespace sk::cpu
