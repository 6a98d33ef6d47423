// A second thread that takes chunks of the large calls of launches that run on one thread.
//
// When another process holds one of a 2-core runtime's CPUs, the load policy runs every launch
// on the launching thread, on the free CPU (load_monitor.h). The thread of the loaded CPU still
// gets part of that CPU (half of it against one busy process, in slices of milliseconds), but it
// cannot own any of the launch's work: whatever it holds when the scheduler takes its CPU would
// be awaited for the rest of the slice. So it only helps. The launching thread (the owner) runs
// each large call of an SK_CHUNKABLE kernel as its chunks (chunk_layout.h), claimed one at a
// time from a shared counter by both threads. The helper computes its chunks into scratch; the
// owner copies them into place once done, and never waits for one for long: a chunk the helper
// has not finished by the time the owner has run out of chunks, for about two chunks' time, the
// owner computes itself and the helper's result is dropped. Every output element is computed by
// the same kernel from the same inputs either way, so the bits are the same.
//
// A helper that the scheduler stopped in the middle of a chunk may go on with it long after the
// owner has moved on, and even after the launch ended: it then reads inputs that have changed
// under it (SK_CHUNKABLE kernels read no addresses from input values, so it only computes
// garbage) into scratch that nobody reads. Until it is idle again, the plan it reads from (its
// kernel arguments, attributes and weights) must stay alive: see wait_idle().
//
//   ChunkHelper helper;
//   // helper thread:  helper.help();               returns after stop()
//   // owner thread:   helper.start(); ...; rc = helper.run(*desc, args, layout, ctx); ...; helper.stop();
#ifndef SUPERKERNEL_RUNTIME_CPU_CHUNK_HELPER_H_
#define SUPERKERNEL_RUNTIME_CPU_CHUNK_HELPER_H_

#include <atomic>
#include <cstdint>

#include "runtime/cpu/chunk_layout.h"
#include "runtime/cpu/sync.h"

namespace sk::cpu {

class ChunkHelper {
 public:
  // Owner: runs the call `args` of `desc` (core layout.core_id of layout.num_cores) as its chunks,
  // sharing them with the helper. `ctx` is the context the whole call would get; each chunk gets
  // it with its own core id and count. Returns the first failing chunk's code (its message in
  // ctx.error_message), after every chunk is done or abandoned.
  int32_t run(const sk_kernel_desc& desc, const sk_kernel_args& args, const ChunkLayout& layout, sk_core_ctx ctx);

  // Helper thread: takes chunks of the owner's calls until stop().
  void help();
  // Owner: lets help() take chunks (call before the helper thread starts help()), and ends it.
  void start() { active_.store(true, std::memory_order_relaxed); }
  void stop();
  // Blocks until the helper is in no chunk: nothing it reads may be freed before.
  void wait_idle() const;
  // Chunks the helper computed and the owner used, and calls run() shared (read from any thread).
  int64_t chunks_helped() const { return helped_.load(std::memory_order_relaxed); }
  int64_t shared_calls() const { return calls_.load(std::memory_order_relaxed); }

 private:
  static constexpr int kNextBits = 24;  // claim_ = call << kNextBits | next chunk
  static constexpr uint64_t kNextMask = (uint64_t{1} << kNextBits) - 1;
  static constexpr uint64_t kFailed = uint64_t{1} << 63;  // done_[j]: the helper's chunk failed

  void help_one(uint64_t claim);

  // The call being shared, published by the owner before claim_.
  std::atomic<const sk_kernel_desc*> desc_{nullptr};
  std::atomic<const sk_kernel_args*> args_{nullptr};
  std::atomic<const ChunkLayout*> layout_{nullptr};
  std::atomic<uint32_t> ctx_flags_{0};
  std::atomic<uint64_t> parts_{0};             // layout_->parts, read before a claim (the layout may be gone)
  std::atomic<std::byte*> snapshot_{nullptr};  // the call's snapshot of its changing inputs
  // The snapshot the helper reads (null: none): the owner writes the other one.
  alignas(kSyncAlign) std::atomic<std::byte*> reading_{nullptr};
  alignas(kSyncAlign) std::atomic<uint64_t> claim_{0};
  // The call whose arguments the helper is copying (0: none): the owner does not return from a
  // call while the helper may still read its arguments, which change between runs.
  alignas(kSyncAlign) std::atomic<uint64_t> copying_{0};
  std::atomic<bool> busy_{false};                                    // the helper is in a chunk
  alignas(kSyncAlign) std::atomic<uint64_t> done_[kMaxChunks] = {};  // per chunk: the call that finished it
  alignas(kSyncAlign) Counter wake_;  // bumped for each new call; the idle helper sleeps on it
  std::atomic<bool> active_{false};
  std::atomic<int64_t> helped_{0};
  std::atomic<int64_t> calls_{0};
  uint64_t call_ = 0;  // owner only: the last call's number
};

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_CHUNK_HELPER_H_
