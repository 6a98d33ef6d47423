// Reads the text print_program writes, so programs can be saved, diffed and loaded back.
#include <algorithm>
#include <sstream>

#include "program/program.h"

namespace sk {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Program text comes from files, so sizes are bounded before anything is allocated from them:
// beyond these a program is corrupt, not large (a launch spans the cores of one machine; op
// indices number the ops of one plan).
constexpr int32_t kMaxLaunchCores = 4096;
constexpr int32_t kMaxOpIndex = (1 << 20) - 1;

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
      if (!(ws >> op) || op < 0 || op > kMaxOpIndex)
        return error(line, "expected 'host <op>' with an op index >= 0 and <= " + std::to_string(kMaxOpIndex), raw);
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
        if (field(rest, "func_align", &v)) l.func_align = std::stoi(v);
        for (auto [name, list] : {std::pair{"ops", &l.ops}, {"early", &l.early_ops}})
          if (field(rest, name, &v)) {
            std::istringstream os(v);
            std::string item;
            while (std::getline(os, item, ','))
              if (!item.empty()) list->push_back(std::stoi(item));
          }
      } catch (const std::exception&) {
        return error(line, "bad number in launch header", raw);
      }
      if (l.num_cores < 1 || l.num_cores > kMaxLaunchCores)
        return error(line, "a launch needs 1 to " + std::to_string(kMaxLaunchCores) + " cores", raw);
      for (int32_t op : l.ops)
        if (op < 0 || op > kMaxOpIndex) return error(line, "op index out of range in ops=", raw);
      for (int32_t op : l.early_ops)
        if (op < 0 || op > kMaxOpIndex) return error(line, "op index out of range in early=", raw);
      if (l.func_align < 0 || l.func_align > kMaxFuncAlign || (l.func_align & (l.func_align - 1)))
        return error(line, "func_align must be a power of two up to " + std::to_string(kMaxFuncAlign) + ", or 0", raw);
      if (launch && launch->groups.empty()) return error(line, "the previous launch has no barrier group", raw);
      l.cores.resize(l.num_cores);
      p.launches.push_back(std::move(l));
      p.steps.push_back({Step::Kind::kLaunch, index});
      launch = &p.launches.back();
      core = nullptr;
    } else if (word == "group") {
      if (!launch) return error(line, "group outside a launch", raw);
      BarrierGroup g;
      int32_t index = -1;
      ws >> index >> g.name;
      if (g.name.empty() || g.name.back() != ':') return error(line, "expected 'group <n> <name>: cores...'", raw);
      if (index != static_cast<int32_t>(launch->groups.size()))
        return error(line, "groups must be numbered in order from 0", raw);
      if (index >= kMaxBarrierGroups) return error(line, "too many barrier groups", raw);
      g.name.pop_back();
      int32_t c;
      while (ws >> c) {
        if (c < 0 || c >= launch->num_cores) return error(line, "group core out of range", raw);
        g.cores.push_back(c);
      }
      if (g.cores.empty()) return error(line, "a barrier group needs at least one core", raw);
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
      const int32_t this_core = static_cast<int32_t>(core - launch->cores.data());
      // Op indices are checked against the launch's ops= list when it has one; a plan is needed to
      // check them further.
      const auto known_op = [&](int32_t op) {
        return op >= 0 && op <= kMaxOpIndex &&
               (launch->ops.empty() || std::find(launch->ops.begin(), launch->ops.end(), op) != launch->ops.end());
      };
      Instr instr;
      std::string a, b;
      if (word == "RUN" || word == "PROLOGUE") {
        instr.op = word == "RUN" ? Opcode::kRun : Opcode::kPrologue;
        char open, slash, close;
        if (!(ws >> instr.a >> open >> instr.b >> slash >> instr.c >> close) || open != '[' || slash != '/' ||
            close != ']')
          return error(line, "expected '" + word + " <op> [<core>/<cores>]'", raw);
        std::string flag;
        if (ws >> flag) {
          if (flag != "ahead" || instr.op != Opcode::kPrologue)
            return error(line, "unexpected '" + flag + "' after " + word + " (only PROLOGUE takes 'ahead')", raw);
          instr.flags |= kInstrAhead;
        }
        const bool early =
            instr.op == Opcode::kPrologue &&
            std::find(launch->early_ops.begin(), launch->early_ops.end(), instr.a) != launch->early_ops.end();
        if (!known_op(instr.a) && !early)
          return error(line, "op " + std::to_string(instr.a) + " is not one of the launch's ops", raw);
        if (instr.c < 1 || instr.b < 0 || instr.b >= instr.c) return error(line, "kernel core id out of range", raw);
        note_label(&p, instr.a, comment);
      } else if (word == "TILING") {
        instr.op = Opcode::kTiling;
        if (!(ws >> instr.a)) return error(line, "expected 'TILING <op>'", raw);
        if (!known_op(instr.a))
          return error(line, "op " + std::to_string(instr.a) + " is not one of the launch's ops", raw);
        note_label(&p, instr.a, comment);
      } else if (word == "PRELOAD") {
        instr.op = Opcode::kPreload;
        std::string mode;
        if (!(ws >> instr.a >> mode)) return error(line, "expected 'PRELOAD <op> per-func|max'", raw);
        if (!known_op(instr.a))
          return error(line, "op " + std::to_string(instr.a) + " is not one of the launch's ops", raw);
        if (mode == preload_code_name(PreloadCode::kPerFunc)) {
          instr.b = static_cast<int32_t>(PreloadCode::kPerFunc);
        } else if (mode == preload_code_name(PreloadCode::kMax)) {
          instr.b = static_cast<int32_t>(PreloadCode::kMax);
        } else {
          return error(line, "expected 'PRELOAD <op> per-func|max'", raw);
        }
        note_label(&p, instr.a, comment);
      } else if (word == "WAIT") {
        instr.op = Opcode::kWait;
        if (!(ws >> a >> instr.a >> b >> instr.b) || a != "core" || b != ">=")
          return error(line, "expected 'WAIT core <c> >= <count>'", raw);
        if (instr.a < 0 || instr.a >= launch->num_cores || instr.a == this_core)
          return error(line, "WAIT on a core that is not another core of the launch", raw);
        if (instr.b < 1) return error(line, "WAIT count must be >= 1", raw);
      } else if (word == "SIGNAL") {
        instr.op = Opcode::kSignal;
        if (!(ws >> instr.b) || instr.b < 1) return error(line, "expected 'SIGNAL <count>' with a count >= 1", raw);
      } else if (word == "BARRIER") {
        instr.op = Opcode::kBarrier;
        if (!(ws >> a >> instr.a) || a != "group") return error(line, "expected 'BARRIER group <g>'", raw);
        if (instr.a < 0 || instr.a >= static_cast<int32_t>(launch->groups.size()))
          return error(line, "BARRIER on a group the launch does not declare", raw);
      } else {
        return error(line, "unknown instruction '" + word + "'", raw);
      }
      core->instrs.push_back(instr);
    }
  }
  if (launch && launch->groups.empty()) return error(line, "the last launch has no barrier group", "");
  *out = std::move(p);
  return Status::ok();
}

}  // namespace sk
