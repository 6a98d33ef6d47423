// The executable plan: flat, pre-built per-op descriptors that launches touch without any
// lookups ("plan once, run many"). Built by the compiler passes, consumed by a backend (the
// compiled artifact's data half; the Program is its control half).
#ifndef SUPERKERNEL_PROGRAM_PLAN_H_
#define SUPERKERNEL_PROGRAM_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "packages/kernel_registry.h"
#include "superkernel/graph.h"
#include "superkernel/kernel_abi.h"

namespace sk {

struct PlanOp {
  int32_t graph_op = -1;
  std::string name;
  OpKind kind = OpKind::kCustom;
  std::string kernel_name;
  const KernelEntry* kernel = nullptr;  // null for host and event ops
  // With kernel replication: the kernel in each loaded copy of its package; core c runs
  // replicas[c % size]. Empty: every core runs kernel->desc.
  std::vector<const sk_kernel_desc*> replicas;
  std::vector<int32_t> input_ids;  // graph tensor ids
  // Per input: 1 when it is a constant (or a view of one), which nothing writes while the plan
  // lives; 0 for inputs, variables and intermediates.
  std::vector<uint8_t> constant_inputs;
  std::vector<int32_t> output_ids;
  std::vector<sk_tensor_arg> inputs;
  std::vector<sk_tensor_arg> outputs;
  std::vector<uint8_t> attrs;
  std::vector<uint8_t> tiling;  // tiling-sink ops: a fixed buffer filled by TILING each run
  bool tiling_sink = false;
  uint64_t workspace_bytes = 0;   // as the kernel sees it: per core with SK_WORKSPACE_PER_CORE
  int64_t workspace_offset = -1;  // in the arena
  std::vector<int32_t> cores;     // device cores running the kernel; index = kernel-local id
  // Set when the compiler split one op into per-core plan ops (recompute): this op is kernel-local
  // core `split_local` of `split_count` of that op, run on its one core. 0: not split.
  int32_t split_local = 0;
  int32_t split_count = 0;
  HostCallback host;
  sk_kernel_args args{};  // points into the vectors above; rebuilt by bind_args()
  // The CPU backend's chunk layouts of this op's calls (runtime/cpu/chunk_layout.h), built by the
  // first launch that shares them with a helper thread; opaque here.
  std::shared_ptr<void> chunk_layouts;

  bool is_kernel() const { return kernel != nullptr; }
  // The kernel-local id and core count the kernel sees on cores[index].
  int32_t local_id(int32_t index) const { return split_count > 0 ? split_local : index; }
  int32_t local_count() const { return split_count > 0 ? split_count : static_cast<int32_t>(cores.size()); }
  bool workspace_per_core() const { return kernel && (kernel->desc->flags & SK_WORKSPACE_PER_CORE); }
  // Arena bytes for the workspace: one slice per core of `cores` for a per-core workspace. The
  // scheduler may later run the op on fewer cores, never on more.
  uint64_t workspace_arena_bytes() const {
    return workspace_per_core() ? workspace_bytes * static_cast<uint64_t>(cores.size()) : workspace_bytes;
  }
  // Points args at this op's own vectors. Call after the op has reached its final address.
  void bind_args();
};

// Tiling-sink kernels write their tiling at run time into a buffer of this size.
inline constexpr uint32_t kTilingSinkCapacity = 64 * 1024;

// Largest tiling a kernel's host tiling function may write.
inline constexpr uint32_t kMaxHostTilingBytes = 1u << 20;

// Runs a kernel's host tiling for `op` (args must describe shapes; data may be null), in buffers
// of 512 bytes, 64 KiB, then 1 MiB, up to `max_bytes`. Tiling sinks get kTilingSinkCapacity in
// every mode, the buffer their TILING step has in graph and superkernel modes.
Status run_tiling(PlanOp& op, uint32_t max_bytes = kMaxHostTilingBytes);

// Runs `op`'s tiling-sink function now (its inputs must be ready). Used by every mode.
int32_t run_sink_tiling(PlanOp& op);

// Where every tensor's bytes live.
struct MemoryPlan {
  std::vector<int64_t> offset;  // per tensor id: arena offset of inputs, outputs and intermediates
  int64_t arena_bytes = 0;
  int64_t peak_live_bytes = 0;
  int64_t unplanned_bytes = 0;
  // Variables are not in the arena: each has storage of its own until it is bound to caller
  // memory (Plan::variables), so that a variable bound before the first run costs nothing here.
  int64_t variable_bytes = 0;
};

struct AlignedBuffer {
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> data;
  size_t bytes = 0;
  // 64-byte aligned, zero-filled; out of memory is an error naming `what`.
  static Expected<AlignedBuffer> allocate(size_t bytes, const std::string& what);
};

// Zero-filled memory that costs nothing until it is written: anonymous pages the kernel maps on
// first touch (no memset). A variable lives in one until it is bound to caller memory, which
// releases it; so a KV cache bound to a shared buffer before the first run never takes memory
// of its own.
struct PageUnmap {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};
struct ZeroPages {
  std::unique_ptr<uint8_t, PageUnmap> data;
  // Page aligned; out of memory (address space) is an error naming `what`.
  static Expected<ZeroPages> allocate(size_t bytes, const std::string& what);
};

struct Plan {
  std::vector<TensorInfo> tensors;  // graph tensors (constant data moved into `constants`)
  std::vector<PlanOp> ops;          // every graph op, program order
  MemoryPlan memory;
  AlignedBuffer arena;
  std::vector<AlignedBuffer> constants;  // per tensor id (empty for non-constants and external ones)
  std::vector<ZeroPages> variables;      // per tensor id: a variable's own storage (released when bound)
  std::vector<uint8_t*> bound;           // per tensor id: caller memory of a bound input/variable, or null
  std::vector<uint8_t*> tensor_data;     // per tensor id: address of element 0

  // Gives constant `id` its storage: external constants stay in place (`t` keeps them alive),
  // the others move from `t.data` into an aligned buffer.
  Status store_constant(int32_t id, TensorInfo& t);
  // Gives every variable that is not bound storage of its own (zero pages), once.
  Status allocate_variables();
  // Moves input/variable `id` into caller memory (releasing a variable's own storage) and
  // re-resolves every pointer.
  void bind(int32_t id, uint8_t* data);
  uint8_t* root_data(int32_t id) const;
  // Fills tensor_data and every op's sk_tensor_arg data pointers.
  void resolve_pointers();
};

// Dense row-major copy of a strided tensor (strides in elements, `elem` bytes per element).
void gather_dense(const uint8_t* src, const Shape& shape, const Shape& strides, size_t elem, uint8_t* dst);

// sk_tensor_arg for tensor `info` (data pointer left null).
sk_tensor_arg make_tensor_arg(const TensorInfo& info);

}  // namespace sk

#endif  // SUPERKERNEL_PROGRAM_PLAN_H_
