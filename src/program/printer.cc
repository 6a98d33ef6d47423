#include <sstream>

#include "program/program.h"

namespace sk {

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kRun:
      return "RUN";
    case Opcode::kPrologue:
      return "PROLOGUE";
    case Opcode::kWait:
      return "WAIT";
    case Opcode::kSignal:
      return "SIGNAL";
    case Opcode::kBarrier:
      return "BARRIER";
    case Opcode::kTiling:
      return "TILING";
    case Opcode::kPreload:
      return "PRELOAD";
  }
  return "?";
}

std::string print_instr(const Instr& in, const std::vector<std::string>& labels) {
  std::ostringstream os;
  os << opcode_name(in.op);
  switch (in.op) {
    case Opcode::kRun:
    case Opcode::kPrologue:
      os << " " << in.a << " [" << in.b << "/" << in.c << "]";
      if (in.flags & kInstrAhead) os << " ahead";
      if (in.a >= 0 && static_cast<size_t>(in.a) < labels.size()) os << "  # " << labels[in.a];
      break;
    case Opcode::kWait:
      os << " core " << in.a << " >= " << in.b;
      break;
    case Opcode::kSignal:
      os << " " << in.b;
      break;
    case Opcode::kBarrier:
      os << " group " << in.a;
      break;
    case Opcode::kPreload:
      os << " " << in.a << " " << preload_code_name(static_cast<PreloadCode>(in.b));
      if (in.a >= 0 && static_cast<size_t>(in.a) < labels.size()) os << "  # " << labels[in.a];
      break;
    case Opcode::kTiling:
      os << " " << in.a;
      if (in.a >= 0 && static_cast<size_t>(in.a) < labels.size()) os << "  # " << labels[in.a];
      break;
  }
  return os.str();
}

std::string print_program(const Program& p) {
  std::ostringstream os;
  for (const Step& step : p.steps) {
    if (step.kind == Step::Kind::kHost) {
      os << "host " << step.index;
      if (static_cast<size_t>(step.index) < p.op_labels.size()) os << "  # " << p.op_labels[step.index];
      os << "\n";
      continue;
    }
    const Launch& l = p.launches[step.index];
    os << "launch " << step.index << " \"" << l.label << "\" cores=" << l.num_cores << " segment=" << l.segment
       << " profile=" << (l.profile ? 1 : 0);
    if (l.func_align) os << " func_align=" << l.func_align;
    os << " ops=";
    for (size_t i = 0; i < l.ops.size(); ++i) os << (i ? "," : "") << l.ops[i];
    if (!l.early_ops.empty()) {
      os << " early=";
      for (size_t i = 0; i < l.early_ops.size(); ++i) os << (i ? "," : "") << l.early_ops[i];
    }
    os << "\n";
    for (size_t g = 0; g < l.groups.size(); ++g) {
      os << "  group " << g << " " << l.groups[g].name << ":";
      for (int32_t c : l.groups[g].cores) os << " " << c;
      os << "\n";
    }
    for (size_t c = 0; c < l.cores.size(); ++c) {
      os << "  core " << c << ":\n";
      for (const Instr& in : l.cores[c].instrs) os << "    " << print_instr(in, p.op_labels) << "\n";
    }
  }
  return os.str();
}

}  // namespace sk
