#include "runtime/cpu/jit.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "runtime/cpu/code_preload.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/cpu/launch_state.h"

#if defined(__x86_64__)
#include <xbyak/xbyak.h>
#endif

namespace sk::cpu {

#if defined(__x86_64__)

namespace {

// ThreadSanitizer sees no access made by generated code, so under it the inline sync fast paths
// would hide the happens-before edges between cores: WAIT and SIGNAL then call the same
// std::atomic code the interpreter runs, which it models.
#if defined(__SANITIZE_THREAD__)
constexpr bool kInlineSync = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kInlineSync = false;
#else
constexpr bool kInlineSync = true;
#endif
#else
constexpr bool kInlineSync = true;
#endif

// Generated function of one core: returns -1 when the core finished or stopped (any failure is
// recorded already), or the index of a RUN, PROLOGUE or TILING whose return code, left in
// CoreState::rc, must be reported.
using CoreFn = int64_t (*)(CoreState* cs, uint64_t epoch_tag);

const Instr& instr_at(const CoreState& cs, int64_t pc) {
  return cs.ls->launch->cores[cs.core].instrs[static_cast<size_t>(pc)];
}

// Helpers the generated code calls; each returns 1 to go on, 0 to stop the core.
int64_t jit_wait_slow(CoreState* cs, int64_t pc) {
  cs->pc = static_cast<size_t>(pc);
  return wait_slow(*cs->ls, *cs, instr_at(*cs, pc)) ? 1 : 0;
}

int64_t jit_wait(CoreState* cs, int64_t pc) {
  const Instr& in = instr_at(*cs, pc);
  // acquire: pairs with the producer's publish().
  if (cs->ls->dev->progress(in.a).value.load(std::memory_order_acquire) >= tag(cs->epoch, static_cast<uint32_t>(in.b)))
    return 1;
  return jit_wait_slow(cs, pc);
}

void jit_signal(CoreState* cs, int64_t count) {
  publish(cs->ls->dev->progress(cs->core), tag(cs->epoch, static_cast<uint32_t>(count)));
}

int64_t jit_barrier(CoreState* cs, int64_t pc) {
  cs->pc = static_cast<size_t>(pc);
  return barrier(*cs->ls, *cs, instr_at(*cs, pc).a) ? 1 : 0;
}

template <class Fn>
uint64_t address_of(Fn* fn) {
  return reinterpret_cast<uint64_t>(fn);
}

// One launch's persistent state: the addresses baked into its code.
struct JitLaunch {
  LaunchState ls;
  std::deque<sk_core_ctx> contexts;   // one per RUN / PROLOGUE, never moved
  std::vector<size_t> entry_offsets;  // per core, into the code buffer
  std::vector<CoreFn> entries;
};

// Code buffer budget: the longest instruction (a RUN: abort check, stores, call, test and its cold
// failure stub) takes well under 160 bytes. Should a program ever outgrow the buffer, xbyak throws
// and compilation fails with a JIT error rather than writing past it.
constexpr size_t kBytesPerInstr = 160;
constexpr size_t kBytesPerFunction = 128;

class Emitter : public Xbyak::CodeGenerator {
 public:
  explicit Emitter(size_t bytes) : Xbyak::CodeGenerator(bytes, Xbyak::DontSetProtectRWE) {}

  void function(JitLaunch& jl, PlanOp* ops, int core) {
    CoreState& state = jl.ls.cores[core];
    const std::vector<Instr>& instrs = jl.ls.launch->cores[core].instrs;
    using namespace Xbyak::util;
    // rbx = CoreState*, r12 = epoch << 32, r13 = &abort. Three pushes after the return address
    // leave the stack 16-byte aligned for the calls.
    push(rbx);
    push(r12);
    push(r13);
    mov(rbx, rdi);
    mov(r12, rsi);
    mov(r13, reinterpret_cast<uint64_t>(&jl.ls.abort));
    Xbyak::Label stop, exit;
    struct Cold {
      Xbyak::Label label, back;
      enum { kFail, kWait, kWake } kind;
      int64_t pc;
    };
    std::deque<Cold> cold;
    auto call_abs = [&](uint64_t fn) {
      mov(rax, fn);
      call(rax);
    };
    auto check_abort = [&] {
      cmp(dword[r13], 0);
      jne(stop, T_NEAR);
    };
    for (size_t pc = 0; pc < instrs.size(); ++pc) {
      const Instr& in = instrs[pc];
      const int64_t at = static_cast<int64_t>(pc);
      switch (in.op) {
        case Opcode::kRun:
        case Opcode::kPrologue: {
          check_abort();
          PlanOp& op = ops[in.a];
          const sk_core_ctx& ctx = jl.contexts.emplace_back(core_ctx_for(in, state));
          const sk_kernel_desc* d = kernel_for_core(op, core);
          // The kernel's sync_all reports a deadlock naming the instruction, as the interpreter does.
          mov(qword[rbx + offsetof(CoreState, pc)], static_cast<uint32_t>(pc));
          mov(byte[rbx + offsetof(CoreState, error)], 0);
          mov(rdi, reinterpret_cast<uint64_t>(&op.args));
          mov(rsi, reinterpret_cast<uint64_t>(&ctx));
          call_abs(in.op == Opcode::kRun ? address_of(d->run) : address_of(d->prologue));
          test(eax, eax);
          Cold& c = cold.emplace_back(Cold{{}, {}, Cold::kFail, at});
          jnz(c.label, T_NEAR);
          break;
        }
        case Opcode::kTiling: {
          check_abort();
          mov(rdi, reinterpret_cast<uint64_t>(&ops[in.a]));
          call_abs(address_of(run_sink_tiling));
          test(eax, eax);
          Cold& c = cold.emplace_back(Cold{{}, {}, Cold::kFail, at});
          jnz(c.label, T_NEAR);
          break;
        }
        case Opcode::kWait: {
          if (!kInlineSync) {
            mov(rdi, rbx);
            mov(rsi, at);
            call_abs(address_of(jit_wait));
            test(eax, eax);
            jz(stop, T_NEAR);
            break;
          }
          // A plain load is an acquire on x86-64 (the interpreter's load(acquire)).
          mov(rax, r12);
          or_(rax, in.b);
          mov(rcx, reinterpret_cast<uint64_t>(&jl.ls.dev->progress(in.a).value));
          cmp(qword[rcx], rax);
          Cold& c = cold.emplace_back(Cold{{}, {}, Cold::kWait, at});
          jb(c.label, T_NEAR);
          L(c.back);
          break;
        }
        case Opcode::kSignal: {
          if (!kInlineSync) {
            mov(rdi, rbx);
            mov(rsi, static_cast<int64_t>(in.b));
            call_abs(address_of(jit_signal));
            break;
          }
          // publish(): xchg is the seq_cst exchange (locked, a full barrier), and the plain load of
          // `sleepers` after it is its seq_cst load.
          Counter& counter = jl.ls.dev->progress(core);
          mov(rax, r12);
          or_(rax, in.b);
          mov(rcx, reinterpret_cast<uint64_t>(&counter));
          xchg(qword[rcx + offsetof(Counter, value)], rax);
          cmp(dword[rcx + offsetof(Counter, sleepers)], 0);
          Cold& c = cold.emplace_back(Cold{{}, {}, Cold::kWake, at});
          jne(c.label, T_NEAR);
          L(c.back);
          break;
        }
        case Opcode::kBarrier:
          mov(rdi, rbx);
          mov(rsi, at);
          call_abs(address_of(jit_barrier));
          test(eax, eax);
          jz(stop, T_NEAR);
          break;
        case Opcode::kPreload: {
          const CodeSpan span = preload_span(ops[in.a], in.b, core);
          const size_t lines = static_cast<size_t>(span.end - span.begin) / kCacheLine;
          if (lines == 0) break;
          Xbyak::Label loop;
          mov(rax, reinterpret_cast<uint64_t>(span.begin));
          mov(ecx, static_cast<uint32_t>(lines));
          L(loop);
          prefetcht1(ptr[rax]);
          add(rax, static_cast<int>(kCacheLine));
          dec(ecx);
          jnz(loop);
          break;
        }
      }
    }
    L(stop);
    mov(rax, -1);
    L(exit);
    pop(r13);
    pop(r12);
    pop(rbx);
    ret();
    // Cold paths, out of the straight line of the hot code.
    for (Cold& c : cold) {
      L(c.label);
      switch (c.kind) {
        case Cold::kFail:
          mov(dword[rbx + offsetof(CoreState, rc)], eax);
          mov(rax, c.pc);
          jmp(exit, T_NEAR);
          break;
        case Cold::kWait:
          mov(rdi, rbx);
          mov(rsi, c.pc);
          call_abs(address_of(jit_wait_slow));
          test(eax, eax);
          jz(stop, T_NEAR);
          jmp(c.back, T_NEAR);
          break;
        case Cold::kWake:
          mov(rdi, rcx);
          call_abs(address_of(static_cast<void (*)(Counter&)>(futex_wake_all)));
          jmp(c.back, T_NEAR);
          break;
      }
    }
  }
};

void run_core(void* raw, int core) {
  auto& jl = *static_cast<JitLaunch*>(raw);
  CoreState& cs = jl.ls.cores[core];
  // launch() assigned the epoch before starting any core and published it with the start signal.
  cs.epoch = jl.ls.dev->current_epoch();
  const int64_t stopped_at = jl.entries[core](&cs, cs.epoch << 32);
  if (stopped_at >= 0) {
    cs.pc = static_cast<size_t>(stopped_at);
    instruction_failed(jl.ls, cs, instr_at(cs, stopped_at), cs.rc);
  }
}

// Every core of the launch on one thread (the device's load policy), by the interpreter: the
// generated functions run a core from start to end and cannot stop at a wait for another.
void run_all_cores(void* raw, int /*thread*/) { run_interleaved(static_cast<JitLaunch*>(raw)->ls); }

}  // namespace

struct JitProgram::Impl {
  CpuDevice* device = nullptr;
  std::vector<std::unique_ptr<JitLaunch>> launches;
  std::unique_ptr<Emitter> code;
};

Expected<std::unique_ptr<JitProgram>> JitProgram::build(CpuDevice& device, Plan& plan, const Program& program) {
  auto impl = std::make_unique<Impl>();
  impl->device = &device;
  size_t bytes = 4096;
  for (const Launch& l : program.launches)
    for (const CoreProgram& cp : l.cores)
      bytes += kBytesPerFunction + static_cast<size_t>(std::max(l.func_align, 16)) + cp.instrs.size() * kBytesPerInstr;
  bytes = (bytes + 4095) & ~size_t{4095};
  try {
    impl->code = std::make_unique<Emitter>(bytes);
    for (const Launch& l : program.launches) {
      SK_CHECK(l.num_cores >= 1 && l.num_cores <= device.num_cores())
          << "launch '" << l.label << "' needs " << l.num_cores << " cores";
      SK_CHECK(!l.groups.empty() && l.groups.size() <= CpuDevice::kMaxBarrierGroups)
          << "launch '" << l.label << "' has " << l.groups.size() << " barrier groups";
      auto jl = std::make_unique<JitLaunch>();
      jl->ls.bind(device, plan.ops.data(), l);
      for (int c = 0; c < l.num_cores; ++c) {
        // func_align pads each generated function to that boundary (16 bytes at least).
        impl->code->align(static_cast<size_t>(std::max(l.func_align, 16)));
        jl->entry_offsets.push_back(impl->code->getSize());
        impl->code->function(*jl, plan.ops.data(), c);
      }
      impl->launches.push_back(std::move(jl));
    }
    impl->code->ready();
    impl->code->setProtectModeRE();
  } catch (const Xbyak::Error& e) {
    return Status::internal(std::string("JIT: code generation failed: ") + e.what());
  }
  const uint8_t* base = impl->code->getCode();
  for (auto& jl : impl->launches)
    for (size_t off : jl->entry_offsets)
      jl->entries.push_back(reinterpret_cast<CoreFn>(reinterpret_cast<uintptr_t>(base + off)));
  return std::unique_ptr<JitProgram>(new JitProgram(std::move(impl)));
}

Status JitProgram::run(int32_t index) {
  JitLaunch& jl = *impl_->launches[static_cast<size_t>(index)];
  jl.ls.reset_for_run();
  impl_->device->launch(jl.ls.launch->num_cores, run_core, &jl, jl.ls.interleavable ? run_all_cores : nullptr);
  return jl.ls.error;
}

size_t JitProgram::code_bytes() const { return impl_->code->getSize(); }

#else  // not x86-64

struct JitProgram::Impl {};

Expected<std::unique_ptr<JitProgram>> JitProgram::build(CpuDevice&, Plan&, const Program&) {
  return Status::unimplemented(
      "option 'super_kernel_optimize_options.jit': the JIT backend generates x86-64 code and this build targets "
      "another architecture; use the interpreter (jit=false)");
}

Status JitProgram::run(int32_t) { return Status::unimplemented("the JIT backend needs an x86-64 build"); }

size_t JitProgram::code_bytes() const { return 0; }

#endif

JitProgram::JitProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitProgram::~JitProgram() = default;

}  // namespace sk::cpu
