// Program: what the compiler hands to a backend. Per launch, one flat instruction list per core.
// It is plain data: printable for humans and tests, and the only thing a backend executes.
//
//   launch 0 "segment 0 (scope layer0)" cores=2
//     core 0: RUN 0 [0/2]; SIGNAL 1; PROLOGUE 1 [0/1] ahead; WAIT 1 1; RUN 1 [0/1] ...
#ifndef SUPERKERNEL_PROGRAM_PROGRAM_H_
#define SUPERKERNEL_PROGRAM_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "superkernel/options.h"
#include "superkernel/status.h"

namespace sk {

enum class Opcode : uint8_t {
  kRun,       // a = plan op, b = kernel-local core id, c = cores running the kernel
  kPrologue,  // same operands as kRun: the kernel's input-independent prologue
  kWait,      // a = core, b = count: wait until that core has signalled `count` times
  kSignal,    // b = count: this core has now signalled `count` times
  kBarrier,   // a = barrier group
  kTiling,    // a = plan op: run its tiling-sink function (its inputs are ready)
  kPreload,   // a = plan op, b = a PreloadCode value: warm the code of that op's kernel
};
const char* opcode_name(Opcode op);

// Instr::flags bits.
inline constexpr uint8_t kInstrAhead = 1;  // PROLOGUE: runs ahead of its op's waits (SK_CORE_AHEAD)

struct Instr {
  Opcode op = Opcode::kRun;
  int32_t a = 0;
  int32_t b = 0;
  int32_t c = 0;
  uint8_t flags = 0;  // kInstr* bits
};

struct CoreProgram {
  std::vector<Instr> instrs;
};

struct BarrierGroup {
  std::string name;
  std::vector<int32_t> cores;
};

// Largest Launch::func_align (a page: alignment beyond it only wastes code memory).
inline constexpr int32_t kMaxFuncAlign = 4096;

// Barrier groups one launch may declare (backends keep a counter per group and core).
inline constexpr int kMaxBarrierGroups = 8;

// One launch: all cores start together, and the launch returns when every core has finished.
struct Launch {
  std::string label;
  int32_t segment = -1;  // fusion segment id, -1 for graph-mode launches
  int32_t num_cores = 1;
  std::vector<BarrierGroup> groups;  // group 0 is every core of the launch
  std::vector<CoreProgram> cores;
  std::vector<int32_t> ops;  // plan ops in execution order
  // Ops of the next launch whose PROLOGUE this launch already runs (early start level 2): their
  // cores warm up for the next launch while the stragglers of this one finish.
  std::vector<int32_t> early_ops;
  bool profile = false;    // record per-core sub-kernel times (scope option profiling=1)
  int32_t func_align = 0;  // bytes a backend that generates code aligns each core's function to (0: its own)
};

// What runs, in order: a launch, or a host op executed by the calling thread.
struct Step {
  enum class Kind { kLaunch, kHost } kind = Kind::kLaunch;
  int32_t index = 0;  // launch index or plan op index
};

struct Program {
  std::vector<Launch> launches;
  std::vector<Step> steps;
  std::vector<std::string> op_labels;  // per plan op: "name (kernel)", for printing
};

// Human-readable, stable text (tests compare it). It is also the serial form: parse_program
// reads it back (comments after '#' carry the op labels).
std::string print_program(const Program& program);
// Parses print_program's text; errors name the line. parse(print(p)) prints as p does. Checks what
// the text alone can: numbering, core and group ranges, WAIT targets, counts, and that RUN /
// PROLOGUE / TILING ops are in the launch's ops= list, and size limits (at most 4096 cores per
// launch, op indices below 2^20) so that corrupt text cannot make it allocate without bound. A
// PROLOGUE may also name one of the launch's early= ops. That
// the op indices exist in a plan is for whoever binds the program to one.
Status parse_program(const std::string& text, Program* program);
std::string print_instr(const Instr& instr, const std::vector<std::string>& op_labels);

}  // namespace sk

#endif  // SUPERKERNEL_PROGRAM_PROGRAM_H_
