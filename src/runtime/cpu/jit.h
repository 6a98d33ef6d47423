// The x86-64 JIT backend: every core's instruction list of every launch becomes one native
// function (binary fusion proper). RUN and PROLOGUE are direct calls of the sub-kernel's entry
// with its argument block and core context as immediates; WAIT is an inline acquire load and
// compare (the interpreter's slow wait only when the value is not there yet); SIGNAL is the
// inline exchange + sleeper check of publish(); BARRIER and TILING call the interpreter's helpers;
// PRELOAD is an inline prefetch loop. Failures take the interpreter's paths (launch_state.h), so
// both backends report the same Status. Built once per executable, after the Program is final.
//
//   auto jit = sk::cpu::JitProgram::build(device, plan, program);
//   if (!jit) return jit.status();              // e.g. not an x86-64 build
//   SK_RETURN_IF_ERROR((*jit)->run(launch_index));
#ifndef SUPERKERNEL_RUNTIME_CPU_JIT_H_
#define SUPERKERNEL_RUNTIME_CPU_JIT_H_

#include <memory>

#include "program/plan.h"
#include "program/program.h"
#include "runtime/cpu/device.h"
#include "superkernel/status.h"

namespace sk::cpu {

class JitProgram {
 public:
  // Generates code for every launch of `program` over `plan`'s ops. `device`, `plan` and
  // `program` must outlive the result and keep their addresses (they are baked into the code).
  static Expected<std::unique_ptr<JitProgram>> build(CpuDevice& device, Plan& plan, const Program& program);
  ~JitProgram();
  JitProgram(const JitProgram&) = delete;
  JitProgram& operator=(const JitProgram&) = delete;

  // Runs launch `index` of the program; the same contract and errors as run_launch(). Runs of
  // one JitProgram must not overlap (an executable runs one at a time).
  Status run(int32_t index);
  // Bytes of generated code (functions included padding), for reports and tests.
  size_t code_bytes() const;

 private:
  struct Impl;
  explicit JitProgram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_JIT_H_
