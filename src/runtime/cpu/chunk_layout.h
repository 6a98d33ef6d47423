// How one kernel call splits into chunks that another thread may run (SK_CHUNKABLE kernels).
//
// A call is core k of n of its op. Its chunks are the calls of cores k*m .. k*m+m-1 of n*m: the
// kernel ABI's determinism rule makes each output element the same bits whoever computes it, and
// sk_split_range's splits nest, so the chunks write exactly what the call writes. This checks
// that with the kernel's `access` ranges before any chunk runs (a call whose chunks write or read
// anything else runs whole), and lays out scratch memory where a helper thread writes its chunks'
// outputs: the thread that owns the call copies them into place once they are done, so a helper
// that the scheduler stops in the middle of a chunk can be abandoned (chunk_helper.h).
//
//   auto layout = build_chunk_layout(*desc, op.args, /*core_id=*/0, /*num_cores=*/2);
//   if (layout) { /* layout->parts chunks; chunk j is core j of 2 * parts... */ }
#ifndef SUPERKERNEL_RUNTIME_CPU_CHUNK_LAYOUT_H_
#define SUPERKERNEL_RUNTIME_CPU_CHUNK_LAYOUT_H_

#include <superkernel/kernel_abi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "program/plan.h"

namespace sk::cpu {

// At most this many chunks per call (the owner tracks them in one 64-bit mask).
inline constexpr int kMaxChunks = 64;

struct ChunkLayout {
  int32_t core_id = 0;  // the call: core `core_id` of `num_cores`
  int32_t num_cores = 1;
  int32_t parts = 1;  // chunk j is core core_id * parts + j of num_cores * parts
  // One output byte range a chunk writes, relative to the output's data pointer.
  struct Write {
    int32_t output = 0;  // index into args.outputs
    int64_t begin = 0;
    int64_t end = 0;
  };
  // Where a chunk's writes to one output land in scratch: bytes [begin, end) of the output map to
  // scratch bytes from `offset` on (plus the output's address modulo 64, to keep its alignment).
  struct Span {
    int32_t operand = 0;  // index into args.outputs (scratch spans) or args.inputs (snapshot spans)
    int64_t begin = 0;
    int64_t end = 0;
    int64_t offset = 0;
  };
  std::vector<std::vector<Write>> writes;  // per chunk
  std::vector<std::vector<Span>> spans;    // per chunk, one per output it writes
  // The bytes the call reads of each input that may change while a helper still reads it (every
  // input but constants): the owner copies them into a snapshot before it shares the call, and the
  // helper reads them there.
  std::vector<Span> snapshot;
  size_t snapshot_bytes = 0;
  std::byte* snapshots[2] = {nullptr, nullptr};  // inside storage, after the scratch
  size_t scratch_bytes = 0;
  AlignedBuffer storage;         // the scratch, then the snapshots
  std::byte* scratch = nullptr;  // the helper's outputs, per chunk at its spans' offsets

  // Where byte `s.begin` of the output at `output_data` lands in scratch (or, for a snapshot
  // span, of the input at `output_data` in snapshot `base`).
  std::byte* span_base(const Span& s, const void* output_data, std::byte* base = nullptr) const {
    const auto shift = (reinterpret_cast<uintptr_t>(output_data) + static_cast<uintptr_t>(s.begin)) & 63u;
    return (base ? base : scratch) + s.offset + shift;
  }
};

// The layout of core `core_id` of `num_cores` of a call of `desc` with `args`, in chunks of about
// `chunk_bytes` read each (RuntimeOptions::chunk_bytes: the default, 256 KiB, is about 15 us of a
// memory-bound GEMV on one core, small against a scheduler slice, so an abandoned chunk costs
// little to redo), or null when the call runs whole: the kernel is not SK_CHUNKABLE (or syncs, or
// has a workspace), the call reads less than two chunks, or its chunks' access ranges are not
// exactly the call's. `why` (optional) says which.
// `constant_inputs` (per input, may be shorter: the rest are not) marks the inputs nothing writes
// while the plan lives; the others are snapshotted.
std::unique_ptr<ChunkLayout> build_chunk_layout(const sk_kernel_desc& desc, const sk_kernel_args& args, int32_t core_id,
                                                int32_t num_cores, int64_t chunk_bytes,
                                                const std::vector<uint8_t>& constant_inputs = {},
                                                std::string* why = nullptr);

// The layout of core `core_id` of `num_cores` of `op`'s calls (null: the call runs whole), built
// on first use and kept with the op. Only from the thread running the op's launch.
const ChunkLayout* chunk_layout_for(PlanOp& op, int32_t core_id, int32_t num_cores, int64_t chunk_bytes);

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_CHUNK_LAYOUT_H_
