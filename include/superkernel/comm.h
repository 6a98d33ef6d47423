// Collectives over MPI that fuse inside super kernels: AllReduce, ReduceScatter, AllGather and
// AlltoAll(v) are kernels of the package libsk_kernels_comm.so, called from graphs like any other
// kernel; Broadcast is communication too, but, as in the original system, it does not fuse: it
// cuts its segment (cut reason COMMUNICATION). docs/COMM.md describes the design. A program using
// this header runs under `mpirun -np N`, one process per rank:
//
//   auto world = sk::comm::Communicator::world();   // MPI_Init_thread(MPI_THREAD_MULTIPLE), checked
//   if (!world) { std::cerr << world.status().to_string() << "\n"; return 1; }
//   std::shared_ptr<sk::comm::Communicator> comm = *world;
//   sk::Status s;
//   {
//     auto rt = sk::Runtime::create();
//     s = comm->load_kernels(**rt);                    // libsk_kernels_comm.so
//     sk::Graph g("row_parallel");
//     sk::Tensor x = g.input("x", sk::DType::kF32, {1, 512});
//     {
//       sk::SuperKernelScope scope(g, "block");
//       sk::Tensor partial = sk::matmul(g, x, w_shard);            // this rank's share of the sum
//       g.output(sk::comm::all_reduce(g, comm->group(), partial), "y");   // one super kernel
//     }
//     auto exe = (*rt)->compile(g, sk::CompileOptions::for_mode(sk::ExecutionMode::kSuperKernel));
//     if (s) s = (*exe)->set_input("x", x_slice);
//     if (s) s = (*exe)->run();
//   }
//   if (!s) s = comm->fail(s);   // stops the other ranks' collectives with an error naming this rank
//   comm.reset();
//   sk::comm::finalize(!s);      // MPI_Finalize, bounded when a rank failed
//
// Every rank must build the same graph (the same ops in the same order; shapes may differ where
// the op allows it, e.g. all_to_all_v's counts): each collective op's messages are told apart by
// a tag taken from its position in the graph. Reductions sum in rank order (rank 0's value, plus
// rank 1's, ...), each element once, by one rank, which then sends the result to the others, so
// every rank gets the same bits whatever the timing, and eager, graph and superkernel modes agree.
#ifndef SUPERKERNEL_COMM_H_
#define SUPERKERNEL_COMM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "superkernel/attrs_comm.h"
#include "superkernel/graph.h"
#include "superkernel/status.h"

namespace sk {
class Runtime;
}

namespace sk::comm {

// What a graph needs to address a communicator: a plain value, so graphs can be built (and
// compiled, explained) without MPI. `handle` is resolved by the comm kernels of this process.
struct Group {
  uint64_t handle = 0;
  int32_t rank = 0;
  int32_t size = 1;
};

struct CommOptions {
  // How long a collective may wait without progress when its kernel is called outside a launch
  // (a hand-built core context without `poll`); inside a launch the runtime's watchdog
  // (RuntimeOptions::watchdog_seconds) applies. Also bounds finalize() after a failure.
  double watchdog_seconds = 30.0;
};

// A rank's report that it failed, as another rank received it.
struct PeerFailure {
  int32_t rank = -1;
  std::string message;
};

class Communicator {
 public:
  // The processes of MPI_COMM_WORLD (this library's own duplicates of it). Initialises MPI with
  // MPI_THREAD_MULTIPLE unless the program already did: collectives run on the runtime's worker
  // threads, several at once with stream fusion. Errors: MPI initialised by the program with a
  // lower thread level, or an MPI library that provides less (the message names both levels).
  static Expected<std::shared_ptr<Communicator>> world(const CommOptions& options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int32_t rank() const;
  int32_t size() const;
  Group group() const;

  // Loads the collective kernels (libsk_kernels_comm.so next to libsuperkernel_comm.so, or
  // $SK_COMM_KERNELS) into `runtime`; loading them twice is a no-op.
  Status load_kernels(Runtime& runtime) const;

  // This rank failed with `error`: tells every other rank once (their collectives then stop with
  // "rank R failed: <message>"), unless the error came from another rank's failure. Returns
  // `error` prefixed with "rank R: ".
  Status fail(const Status& error);
  // The first failure another rank reported, if any has arrived.
  std::optional<PeerFailure> peer_failure() const;

  // Restricts this process to its share of the CPUs it may use when several ranks run on one
  // machine without a binding from the launcher (each rank would otherwise pin its cores to the
  // same CPUs): local rank i of L gets the i-th of L nearly equal slices. Does nothing when the
  // launcher already bound the ranks to disjoint CPUs. Returns the CPUs kept.
  Expected<int> share_cpus_between_local_ranks();

  struct State;  // src/comm/comm_state.h

 private:
  explicit Communicator(State* state);
  State* state_;
};

// Finalises MPI when this library initialised it (call once, after the last collective and
// after every executable that uses one is gone). With `failed`, a rank whose error stops the
// others: MPI_Finalize waits for every rank, so it gives up after the watchdog and exits the
// process with code 1 rather than hang on a rank that never arrives.
Status finalize(bool failed = false);

// Path of the collective kernel package (libsk_kernels_comm.so).
std::string kernel_package_path();

// ---- Graph builders (docs/COMM.md has each kernel's contract) ---------------------------------
// Part of libsuperkernel, not libsuperkernel_comm: they use no MPI, so a graph with collectives can
// be built, compiled and explained in any process. Each appends one op; bad operands are recorded as graph errors naming the op. Operands must be
// dense (copy a strided view first). Reductions: f32, bf16, f16 (summed in f32, rounded once) and
// i32 (wrapping); the other collectives move bytes of any dtype.

// Elementwise sum over the ranks; y has x's shape.
Tensor all_reduce(Graph& g, const Group& group, Tensor x, std::string name = "");
// x [size * M, ...] -> [M, ...]: rank r gets block r of the sum.
Tensor reduce_scatter(Graph& g, const Group& group, Tensor x, std::string name = "");
// x [M, ...] -> [size * M, ...]: block q is rank q's x.
Tensor all_gather(Graph& g, const Group& group, Tensor x, std::string name = "");
// x [size * M, ...] -> [size * M, ...]: block q of x goes to rank q; block s of y is from rank s.
Tensor all_to_all(Graph& g, const Group& group, Tensor x, std::string name = "");

// Variable sizes: rank q receives send_counts[q * groups + j] rows of group j (i32
// [size * groups]), laid out in x by `in_layout`; y [out_rows, ...] holds what arrives, laid out
// by `out_layout` (rows past the received ones are zero). With groups = local experts and a
// group-major output, the rows arrive grouped by expert, ready for a grouped matmul.
struct AllToAllV {
  Tensor y;             // [out_rows, ...] of x's dtype
  Tensor recv_counts;   // i32 [size * groups]: rows of (source rank s, group j) at s * groups + j
  Tensor group_counts;  // i32 [groups]: rows of each group, summed over the source ranks
};
AllToAllV all_to_all_v(Graph& g, const Group& group, Tensor x, Tensor send_counts, int64_t out_rows, int32_t groups = 1,
                       int32_t in_layout = SK_COMM_RANK_MAJOR, int32_t out_layout = SK_COMM_RANK_MAJOR,
                       std::string name = "");

// Rank `root`'s x to every rank. Not fusible: it runs in a launch of its own (COMMUNICATION).
Tensor broadcast(Graph& g, const Group& group, Tensor x, int32_t root, std::string name = "");

}  // namespace sk::comm

#endif  // SUPERKERNEL_COMM_H_
