// The runtime: a CPU device (persistent pinned workers), the loaded kernel packages, and
// executables compiled from graphs.
//
//   auto rt = sk::Runtime::create();                         // every available core
//   if (!rt) { std::cerr << rt.status().to_string(); return 1; }
//   auto exe = (*rt)->compile(graph, sk::CompileOptions::for_mode(sk::ExecutionMode::kGraph));
//   if (!exe) { ... }
//   (*exe)->set_input("x", x.data(), x.size() * sizeof(float));
//   if (sk::Status s = (*exe)->run(); !s) { ... }
//   std::vector<float> y = (*exe)->output_f32("y");
#ifndef SUPERKERNEL_RUNTIME_H_
#define SUPERKERNEL_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "superkernel/compile.h"
#include "superkernel/graph.h"
#include "superkernel/load_policy.h"
#include "superkernel/options.h"
#include "superkernel/status.h"

namespace sk {

// The most cores one runtime drives (each is a pinned worker thread with its own sync state).
inline constexpr int kMaxRuntimeCores = 1024;

// RuntimeOptions::chunk_bytes: 0, or in [kMinChunkBytes, kMaxChunkBytes].
inline constexpr int64_t kMinChunkBytes = 4096;
inline constexpr int64_t kMaxChunkBytes = int64_t{1} << 30;

struct RuntimeOptions {
  int num_cores = 0;                 // 0: every CPU available to the process; at most kMaxRuntimeCores
  int cube_cores = 0;                // cores [0, cube_cores) form the cube group, the rest the vector group;
                                     // 0: every core serves both kinds
  bool pin_threads = true;           // pin workers (and the launching thread) one per CPU
  bool allow_oversubscribe = false;  // tests only: more cores than CPUs
  int64_t spin_us = 200;             // longest spin before a waiting core sleeps (less: docs/ARCHITECTURE.md)
  double watchdog_seconds = 30.0;    // a sync wait longer than this fails the run as a deadlock
  LoadPolicy load_policy = LoadPolicy::kAdaptive;  // docs/OPTIONS.md
  // While a 2-core runtime's launches run on one thread (the load policy), the other CPU's thread
  // takes chunks of about this many bytes read of calls that read at least twice as much (kernels
  // with SK_CHUNKABLE); 0: it stays idle. 0 or kMinChunkBytes .. kMaxChunkBytes. docs/OPTIONS.md
  int64_t chunk_bytes = 256 << 10;
  bool load_builtin_kernels = true;
  std::vector<std::string> kernel_packages;  // extra packages to load at start
};

class Executable;

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  static Expected<std::shared_ptr<Runtime>> create(const RuntimeOptions& options = {});
  ~Runtime();

  Status load_kernel_package(const std::string& path);
  std::vector<std::string> kernel_names() const;
  int num_cores() const;
  // Launches that ran every core on one thread (the load policy), since the runtime started.
  int64_t one_thread_launches() const;
  // Calls of those launches whose chunks were shared with the other CPU's thread (chunk_bytes).
  int64_t shared_calls() const;
  // "avx512", "avx2" or "scalar": the widest vector ISA the CPU offers.
  static std::string cpu_isa();

  // Compiles `graph` for the mode the options select. The graph may be destroyed afterwards.
  Expected<std::unique_ptr<Executable>> compile(const Graph& graph, const CompileOptions& options = {});

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  Runtime();
  std::unique_ptr<Impl> impl_;
};

class Executable {
 public:
  ~Executable();

  ExecutionMode mode() const;
  const CompileReport& report() const;

  // Copies caller data into an input or variable (sizes must match exactly; data may be null
  // only for 0 bytes). Every input must be set before the first run (run() fails naming the
  // first one that was not); a value stays until set again. Variables start zeroed.
  Status set_input(std::string_view name, const void* data, size_t bytes);
  template <typename T>
  Status set_input(std::string_view name, std::span<const T> values) {
    return set_input(name, values.data(), values.size_bytes());
  }
  Status set_input(std::string_view name, const std::vector<float>& values) {
    return set_input(name, values.data(), values.size() * sizeof(float));
  }

  // From now on the input or variable `name` lives in caller memory `data` (exactly its bytes,
  // aligned to its dtype size), so several executables (prefill and decode, or different modes)
  // can share one KV cache. The current contents of `data` are used as they are; set_input()
  // then copies into it. `data` must stay valid while the executable runs or reads it, and must
  // not overlap another tensor bound to this executable.
  Status bind_variable(std::string_view name, void* data, size_t bytes);

  // Runs the whole graph once.
  //
  // An executable serves one call at a time: run() or set_input() while another thread is inside
  // run() or set_input() of the same executable fails with FAILED_PRECONDITION and changes
  // nothing. Compile one executable per thread; executables of one runtime may run concurrently
  // (their launches take turns on the device). Reading an executable's tensors while another
  // thread runs it is a data race.
  Status run();

  // An output, input or variable as it is now (points into the executable; valid until the next
  // run). Views may be strided.
  Expected<HostTensor> tensor(std::string_view name) const;
  // Dense copy of an output/variable into `dst` (bytes must match).
  Status read(std::string_view name, void* dst, size_t bytes) const;
  // Dense f32 copy; empty on error (use read() for the Status).
  std::vector<float> output_f32(std::string_view name) const;
  // Names of the graph outputs, in creation order.
  std::vector<std::string> output_names() const;

  // Data dump of the last run (CompileOptions::dump): every op's outputs.
  const std::vector<DumpRecord>& dump() const;
  // Per-core trace of the last run (super_kernel_debug_options.debug_op_exec_trace, the option
  // `trace` or the scope option profiling=1).
  // Every instruction's interval per core: sub-kernel runs, prologues, tilings, waits (with the
  // producer op and core), signals, barriers, and host ops (core -1).
  const std::vector<TraceEvent>& trace() const;
  // Writes trace() as Chrome/Perfetto trace JSON (docs/TRACING.md); an error when tracing is off.
  Status write_trace(const std::string& path) const;

  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sk

#endif  // SUPERKERNEL_RUNTIME_H_
