#include "runtime/cpu/chunk_helper.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace sk::cpu {

namespace {

// Chunk j of the call `layout` describes, into the outputs `args` points at.
int32_t run_chunk(const sk_kernel_desc& desc, const sk_kernel_args& args, const ChunkLayout& layout, sk_core_ctx ctx,
                  uint64_t j) {
  ctx.core_id = layout.core_id * layout.parts + static_cast<int32_t>(j);
  ctx.num_cores = layout.num_cores * layout.parts;
  return desc.run(&args, &ctx);
}

// The helper's chunks need no sync: SK_CHUNKABLE kernels never call it (build_chunk_layout
// refuses kernels that may), so a call is a broken promise.
int32_t refuse_sync(const sk_core_ctx* ctx) {
  std::snprintf(ctx->error_message, ctx->error_capacity, "an SK_CHUNKABLE kernel called sync_all");
  return SK_ERR_INTERNAL;
}

}  // namespace

int32_t ChunkHelper::run(const sk_kernel_desc& desc, const sk_kernel_args& args, const ChunkLayout& layout,
                         sk_core_ctx ctx) {
  const uint64_t call = ++call_;
  calls_.fetch_add(1, std::memory_order_relaxed);
  const auto parts = static_cast<uint64_t>(layout.parts);
  desc_.store(&desc, std::memory_order_relaxed);
  args_.store(&args, std::memory_order_relaxed);
  layout_.store(&layout, std::memory_order_relaxed);
  ctx_flags_.store(ctx.flags, std::memory_order_relaxed);
  parts_.store(parts, std::memory_order_relaxed);
  // The inputs that may change (all but constants) go to a snapshot, which the helper reads
  // instead: one abandoned in a chunk reads it on, after we have moved on and written them again.
  // Of the two snapshots, the one the helper is not reading (seq_cst, with the helper's store of
  // reading_ before its claim: it either reads the one we saw, or fails to claim).
  std::byte* snapshot = nullptr;
  if (layout.snapshot_bytes > 0) {
    snapshot =
        reading_.load(std::memory_order_seq_cst) == layout.snapshots[0] ? layout.snapshots[1] : layout.snapshots[0];
    for (const ChunkLayout::Span& s : layout.snapshot) {
      const auto* in = static_cast<const std::byte*>(args.inputs[s.operand].data);
      std::memcpy(layout.span_base(s, in, snapshot), in + s.begin, static_cast<size_t>(s.end - s.begin));
    }
  }
  snapshot_.store(snapshot, std::memory_order_relaxed);
  // seq_cst (a release): the helper that reads this call number sees the fields above.
  claim_.store(call << kNextBits, std::memory_order_seq_cst);
  publish(wake_, call);

  uint64_t mine = 0;
  int64_t own_ns = 0;
  int own = 0;
  int32_t rc = SK_OK;
  for (;;) {
    const uint64_t j = claim_.fetch_add(1, std::memory_order_acq_rel) & kNextMask;
    if (j >= parts) break;
    const int64_t t0 = now_ns();
    rc = run_chunk(desc, args, layout, ctx, j);
    own_ns += now_ns() - t0;
    ++own;
    mine |= uint64_t{1} << j;
    if (rc != SK_OK) break;
  }
  // Close the call: the helper takes no more of it. seq_cst, with the load of copying_ below and
  // the helper's store of copying_ before its claim: either its claim fails, or we see it copying
  // our arguments and wait until it has (they may change once we return).
  claim_.store((call << kNextBits) | kNextMask, std::memory_order_seq_cst);
  while (copying_.load(std::memory_order_seq_cst) == call) cpu_relax();
  if (rc != SK_OK) return rc;

  // The helper holds at most one unfinished chunk (it claims the next only once one is done). A
  // running helper finishes it within about a chunk's time; one the scheduler stopped may take a
  // slice, so after two chunks' time we compute it ourselves.
  const int64_t patience = own > 0 ? 2 * own_ns / own + 2'000 : 50'000;
  for (uint64_t j = 0; j < parts; ++j) {
    if (mine & (uint64_t{1} << j)) continue;
    uint64_t done = done_[j].load(std::memory_order_acquire);
    if (done != call && done != (call | kFailed)) {
      const int64_t t0 = now_ns();
      do {
        cpu_relax();
        done = done_[j].load(std::memory_order_acquire);
      } while (done != call && done != (call | kFailed) && now_ns() - t0 < patience);
    }
    if (done == call) {
      for (const ChunkLayout::Span& s : layout.spans[j]) {
        auto* out = static_cast<std::byte*>(args.outputs[s.operand].data);
        const std::byte* base = layout.span_base(s, out);
        for (const ChunkLayout::Write& w : layout.writes[j])
          if (w.output == s.operand)
            std::memcpy(out + w.begin, base + (w.begin - s.begin), static_cast<size_t>(w.end - w.begin));
      }
      helped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // Not done in time, or it failed on the helper: ours (a failure is then reported from here).
    rc = run_chunk(desc, args, layout, ctx, j);
    if (rc != SK_OK) return rc;
  }
  return SK_OK;
}

void ChunkHelper::help_one(uint64_t claim) {
  const uint64_t call = claim >> kNextBits;
  // Read before the claim: a claim that succeeds proves the owner had not closed this call, so
  // these were still its fields (the owner writes the next call's only after closing this one).
  const sk_kernel_desc* desc = desc_.load(std::memory_order_acquire);
  const sk_kernel_args* shared = args_.load(std::memory_order_acquire);
  const ChunkLayout* layout = layout_.load(std::memory_order_acquire);
  const uint32_t flags = ctx_flags_.load(std::memory_order_relaxed);
  std::byte* snapshot = snapshot_.load(std::memory_order_acquire);
  busy_.store(true, std::memory_order_seq_cst);
  reading_.store(snapshot, std::memory_order_seq_cst);
  copying_.store(call, std::memory_order_seq_cst);
  uint64_t expected = claim;
  if (!claim_.compare_exchange_strong(expected, claim + 1, std::memory_order_seq_cst)) {
    copying_.store(0, std::memory_order_release);
    reading_.store(nullptr, std::memory_order_release);
    busy_.store(false, std::memory_order_release);
    return;
  }
  const uint64_t j = claim & kNextMask;
  // Our own copy of the arguments, with the outputs this chunk writes moved into scratch.
  // Attributes and tiling too: an eager op's live only as long as its launch, and a chunk the
  // scheduler stops may run on past it.
  thread_local std::vector<sk_tensor_arg> inputs, outputs;
  thread_local std::vector<std::byte> attrs, tiling;
  sk_kernel_args args = *shared;
  inputs.assign(shared->inputs, shared->inputs + shared->num_inputs);
  outputs.assign(shared->outputs, shared->outputs + shared->num_outputs);
  const auto* a = static_cast<const std::byte*>(shared->attrs);
  const auto* t = static_cast<const std::byte*>(shared->tiling);
  attrs.assign(a, a ? a + shared->attrs_size : a);
  tiling.assign(t, t ? t + shared->tiling_size : t);
  copying_.store(0, std::memory_order_release);
  if (a) args.attrs = attrs.data();
  if (t) args.tiling = tiling.data();
  for (const ChunkLayout::Span& s : layout->spans[j]) {
    sk_tensor_arg& out = outputs[static_cast<size_t>(s.operand)];
    // The kernel writes byte b of the output at data + b; for b in [s.begin, s.end) that is now
    // inside the span's scratch. (Integer arithmetic: the moved base may lie outside scratch.)
    out.data = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(layout->span_base(s, out.data)) -
                                       static_cast<uintptr_t>(s.begin));
  }
  // The changing inputs from the call's snapshot.
  for (const ChunkLayout::Span& s : layout->snapshot) {
    sk_tensor_arg& in = inputs[static_cast<size_t>(s.operand)];
    in.data = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(layout->span_base(s, in.data, snapshot)) -
                                      static_cast<uintptr_t>(s.begin));
  }
  args.inputs = inputs.data();
  args.outputs = outputs.data();
  char error[256];
  sk_core_ctx ctx{};
  ctx.sync_all = refuse_sync;
  ctx.error_message = error;
  ctx.error_capacity = sizeof(error);
  ctx.flags = flags;
  const int32_t rc = run_chunk(*desc, args, *layout, ctx, j);
  done_[j].store(rc == SK_OK ? call : call | kFailed, std::memory_order_release);
  reading_.store(nullptr, std::memory_order_release);
  busy_.store(false, std::memory_order_release);
}

void ChunkHelper::help() {
  WaitControl sleep;  // no watchdog: an idle helper waits as long as it takes
  sleep.spin_ns = 0;
  while (active_.load(std::memory_order_acquire)) {
    const uint64_t seen = wake_.value.load(std::memory_order_acquire);
    // Spin a little for the next call: the owner's small ops between two large ones take
    // microseconds, and a sleeping helper misses the start of the next.
    const int64_t until = now_ns() + 20'000;
    for (;;) {
      // Only values before a successful claim: the call's layout may belong to an op gone by now.
      const uint64_t claim = claim_.load(std::memory_order_acquire);
      if ((claim >> kNextBits) != 0 && (claim & kNextMask) < parts_.load(std::memory_order_acquire)) {
        help_one(claim);
        break;
      }
      if (!active_.load(std::memory_order_relaxed)) return;
      if (now_ns() > until) {
        wait_at_least(wake_, seen + 1, sleep);
        break;
      }
      cpu_relax();
    }
  }
}

void ChunkHelper::stop() {
  active_.store(false, std::memory_order_release);
  publish(wake_, ++call_);
}

void ChunkHelper::wait_idle() const {
  while (busy_.load(std::memory_order_acquire)) cpu_relax();
}

}  // namespace sk::cpu
