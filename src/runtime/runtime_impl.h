// Private state of sk::Runtime and sk::Executable.
#ifndef SUPERKERNEL_RUNTIME_RUNTIME_IMPL_H_
#define SUPERKERNEL_RUNTIME_RUNTIME_IMPL_H_

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "packages/kernel_registry.h"
#include "program/plan.h"
#include "program/program.h"
#include "runtime/cpu/device.h"
#include "runtime/cpu/jit.h"
#include "superkernel/runtime.h"

namespace sk {

struct Runtime::Impl {
  RuntimeOptions options;
  std::unique_ptr<cpu::CpuDevice> device;
  KernelRegistry registry;
};

struct Executable::Impl {
  std::shared_ptr<Runtime> runtime;  // keeps the device and the kernel packages alive
  ExecutionMode mode = ExecutionMode::kGraph;
  std::unique_ptr<Plan> plan;
  Program program;
  CompileReport report;
  // Generated code of the program's launches (option jit), built once after compile; untraced
  // launches run it, traced and profiled ones the interpreter.
  std::unique_ptr<cpu::JitProgram> jit;
  std::unordered_map<std::string, int32_t> names;  // inputs, variables, outputs -> tensor id
  std::vector<std::string> output_names;
  std::vector<int32_t> unset_inputs;  // inputs no set_input has given yet: run() refuses to start
  std::atomic<bool> busy{false};      // a run() or set_input() is in progress (one at a time)

  bool dump_enabled = false;
  std::string dump_dir;
  std::vector<DumpRecord> dump;
  bool trace_enabled = false;
  std::vector<TraceEvent> trace;
  std::string trace_path;     // written after every run when set
  bool access_check = false;  // debug_cross_core_sync_check: every mode runs op by op, core by core

  cpu::CpuDevice& device() { return *runtime->impl().device; }
  const KernelRegistry& registry() { return runtime->impl().registry; }

  // The device's chunk helper may still be in a chunk of one of our launches (chunk_helper.h):
  // the plan it reads from outlives it.
  ~Impl() {
    if (runtime && runtime->impl().device) device().wait_helper_idle();
  }
};

// Mode runners (src/runtime/run_modes.cc). run_eager also runs every mode under the access checker.
Status run_eager(Executable::Impl& exe);
Status run_program(Executable::Impl& exe);
// Runs a host op's callback on the calling thread.
Status run_host_op(Plan& plan, PlanOp& op);
// Appends the outputs of `op` to the executable's dump.
void dump_op_outputs(Executable::Impl& exe, const PlanOp& op);

}  // namespace sk

#endif  // SUPERKERNEL_RUNTIME_RUNTIME_IMPL_H_
