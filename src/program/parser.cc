// Reads the text print_program writes, so programs can be saved, diffed and loaded back.
#include <sstream>

#include "program/program.h"

namespace sk {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

Status error(int line, const std::string& what, const std::string& text) {
  return Status::invalid_argument("program text line " + std::to_string(line) + ": " + what + ": '" + text + "'");
}

// "key=value" fields of a launch header.
bool field(const std::string& text, const std::string& key, std::string* value) {
  size_t at = text.find(" " + key + "=");
  if (at == std::string::npos) return false;
  at += key.size() + 2;
  size_t end = text.find(' ', at);
  *value = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  return true;
}

void note_label(Program* p, int32_t op, const std::string& comment) {
  if (op < 0 || comment.empty()) return;
  if (p->op_labels.size() <= static_cast<size_t>(op)) p->op_labels.resize(op + 1);
  p->op_labels[op] = comment;
}

}  // namespace

Status parse_program(const std::string& text, Program* out) {
  Program p;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  Launch* launch = nullptr;
  CoreProgram* core = nullptr;
  while (std::getline(in, raw)) {
    ++line;
    std::string comment;
    std::string body = raw;
    if (size_t hash = raw.find("  # "); hash != std::string::npos) {
      comment = raw.substr(hash + 4);
      body = raw.substr(0, hash);
    }
    const std::string t = trim(body);
    if (t.empty()) continue;
    std::istringstream ws(t);
    std::string word;
    ws >> word;
    if (word == "host") {
      int32_t op;
      if (!(ws >> op)) return error(line, "expected 'host <op>'", raw);
      p.steps.push_back({Step::Kind::kHost, op});
      note_label(&p, op, comment);
      launch = nullptr;
      core = nullptr;
    } else if (word == "launch") {
      size_t q1 = t.find('"'), q2 = t.rfind('"');
      int32_t index;
      if (!(ws >> index) || q1 == std::string::npos || q2 == q1) return error(line, "bad launch header", raw);
      if (index != static_cast<int32_t>(p.launches.size()))
        return error(line, "launches must be numbered in order", raw);
      Launch l;
      l.label = t.substr(q1 + 1, q2 - q1 - 1);
      const std::string rest = t.substr(q2 + 1);
      std::string v;
      try {
        if (!field(rest, "cores", &v)) return error(line, "launch without cores=", raw);
        l.num_cores = std::stoi(v);
        if (field(rest, "segment", &v)) l.segment = std::stoi(v);
        if (field(rest, "profile", &v)) l.profile = v == "1";
        if (field(rest, "ops", &v)) {
          std::istringstream os(v);
          std::string item;
          while (std::getline(os, item, ','))
            if (!item.empty()) l.ops.push_back(std::stoi(item));
        }
      } catch (const std::exception&) {
        return error(line, "bad number in launch header", raw);
      }
      if (l.num_cores < 1) return error(line, "a launch needs at least one core", raw);
      l.cores.resize(l.num_cores);
      p.launches.push_back(std::move(l));
      p.steps.push_back({Step::Kind::kLaunch, index});
      launch = &p.launches.back();
      core = nullptr;
    } else if (word == "group") {
      if (!launch) return error(line, "group outside a launch", raw);
      BarrierGroup g;
      int32_t index;
      ws >> index >> g.name;
      if (g.name.empty() || g.name.back() != ':') return error(line, "expected 'group <n> <name>: cores...'", raw);
      g.name.pop_back();
      int32_t c;
      while (ws >> c) g.cores.push_back(c);
      launch->groups.push_back(std::move(g));
    } else if (word == "core") {
      std::string id;
      ws >> id;
      if (!launch || id.empty() || id.back() != ':') return error(line, "expected 'core <n>:' inside a launch", raw);
      const int c = std::atoi(id.c_str());
      if (c < 0 || c >= launch->num_cores) return error(line, "core out of range", raw);
      core = &launch->cores[c];
    } else {
      if (!core) return error(line, "instruction outside a core", raw);
      Instr instr;
      std::string a, b;
      if (word == "RUN" || word == "PROLOGUE") {
        instr.op = word == "RUN" ? Opcode::kRun : Opcode::kPrologue;
        char open, slash, close;
        if (!(ws >> instr.a >> open >> instr.b >> slash >> instr.c >> close) || open != '[' || slash != '/' ||
            close != ']')
          return error(line, "expected '" + word + " <op> [<core>/<cores>]'", raw);
        note_label(&p, instr.a, comment);
      } else if (word == "TILING") {
        instr.op = Opcode::kTiling;
        if (!(ws >> instr.a)) return error(line, "expected 'TILING <op>'", raw);
        note_label(&p, instr.a, comment);
      } else if (word == "WAIT") {
        instr.op = Opcode::kWait;
        if (!(ws >> a >> instr.a >> b >> instr.b) || a != "core" || b != ">=")
          return error(line, "expected 'WAIT core <c> >= <count>'", raw);
      } else if (word == "SIGNAL") {
        instr.op = Opcode::kSignal;
        if (!(ws >> instr.b)) return error(line, "expected 'SIGNAL <count>'", raw);
      } else if (word == "BARRIER") {
        instr.op = Opcode::kBarrier;
        if (!(ws >> a >> instr.a) || a != "group") return error(line, "expected 'BARRIER group <g>'", raw);
      } else {
        return error(line, "unknown instruction '" + word + "'", raw);
      }
      core->instrs.push_back(instr);
    }
  }
  *out = std::move(p);
  return Status::ok();
}

}  // namespace sk
