// Run-time records: the data dump, the per-core trace of a run, its export as a Chrome/Perfetto
// trace and the wait accounting derived from it.
//
//   for (const sk::DumpRecord& r : exe->dump())
//     std::printf("%s %s %s %zu bytes\n", r.op.c_str(), r.tensor.c_str(),
//                 sk::shape_to_string(r.shape).c_str(), r.data.size());
//
//   // debug_op_exec_trace=true, then after run():
//   sk::Status s = sk::write_chrome_trace("t.json", {{"graph", exe->trace()}});  // open in ui.perfetto.dev
//   std::printf("%s", sk::format_waits(sk::account_waits(exe->trace()), 5).c_str());
#ifndef SUPERKERNEL_TRACE_H_
#define SUPERKERNEL_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "superkernel/graph.h"
#include "superkernel/status.h"

namespace sk {

// One op output captured by the data dump.
struct DumpRecord {
  std::string op;      // op name
  std::string tensor;  // tensor name
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<uint8_t> data;  // dense bytes
};

// What a traced interval is.
enum class TraceKind {
  kRun,       // a sub-kernel's run on one core
  kPrologue,  // a sub-kernel's input-independent prologue
  kTiling,    // a tiling-sink function run on the device
  kWait,      // a core waiting for another core's signal
  kSignal,    // a core publishing its progress (an instant: start == end)
  kBarrier,   // a core in a barrier of its launch
  kHost,      // a host op on the calling thread (core -1)
};
const char* trace_kind_name(TraceKind kind);

// One interval on one core.
struct TraceEvent {
  std::string op;      // run/prologue/tiling/host: the op. wait: the op whose signal released it
                       // (the producer). signal: the op the signal publishes. barrier: empty
  std::string kernel;  // the kernel of `op` (empty for host ops and barriers)
  int32_t core = 0;
  int32_t launch = 0;    // launch index (eager: plan op index)
  int64_t start_ns = 0;  // relative to the start of the run
  int64_t end_ns = 0;
  TraceKind kind = TraceKind::kRun;
  int32_t peer = -1;     // wait: the producer core; barrier: the barrier group
  int32_t count = 0;     // wait: the signal count waited for; signal: the count published
  int32_t segment = -1;  // fusion segment of the launch (-1 outside super kernels)
};

// One traced run under a label (an execution mode when modes are compared).
struct TraceRun {
  std::string label;
  std::vector<TraceEvent> events;
};

// Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev): one process per run, one thread per
// core (tid = core, host ops on tid 1000), complete events ("X") named "op (kernel)", and flow
// arrows ("s"/"f") from each signal to the end of every wait it releases (never back in time).
std::string chrome_trace_json(const std::vector<TraceRun>& runs);
Status write_chrome_trace(const std::string& path, const std::vector<TraceRun>& runs);

// Where the time of one core went within one launch.
struct CoreTime {
  int32_t core = 0;
  int64_t compute_ns = 0;  // runs, prologues, tilings
  int64_t wait_ns = 0;     // waits for other cores' signals
  int64_t barrier_ns = 0;
  int64_t idle_ns = 0;  // the rest of the launch's span (dispatch, sync instructions, early finish)
};

// Waits for one producer op, summed.
struct WaitTotal {
  std::string op;      // the op waited for
  std::string kernel;  // its kernel
  int32_t producer = -1;
  int64_t ns = 0;
  int64_t count = 0;
};

struct LaunchTime {
  int32_t launch = 0;
  int32_t segment = -1;
  int64_t span_ns = 0;  // first start to last end over the launch's cores
  std::vector<CoreTime> cores;
  std::vector<WaitTotal> waits;  // longest first
};

struct WaitAccount {
  std::vector<LaunchTime> launches;  // in launch order
  std::vector<WaitTotal> top;        // over the whole run, by (op, producer core), longest first
  int64_t compute_ns = 0, wait_ns = 0, barrier_ns = 0, idle_ns = 0;  // summed over cores and launches
};

// Per launch (segment) and per core: compute, wait (by the op waited for), barrier and idle time.
WaitAccount account_waits(const std::vector<TraceEvent>& events);
// A short text table: the totals and the `top` longest waits.
std::string format_waits(const WaitAccount& account, int top);

}  // namespace sk

#endif  // SUPERKERNEL_TRACE_H_
