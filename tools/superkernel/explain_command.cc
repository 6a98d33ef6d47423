// `superkernel explain`: what the compiler makes of the model's decode step in the configured
// mode: segments per layer with their cut reasons in plain words, streams and core limits, and a
// per-core program summary (sk::explain's full text with --programs).
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "commands.h"

namespace sk::cli {

const char* plain_words(CutReason reason) {
  switch (reason) {
    case CutReason::kGraphEnd:
      return "the graph ends here";
    case CutReason::kOpUnsupported:
      return "the next op's kernel cannot be fused (not SK_FUSIBLE)";
    case CutReason::kHostOp:
      return "the next op runs on the host";
    case CutReason::kScopeBoundary:
      return "the next op belongs to another scope";
    case CutReason::kNotFused:
      return "the op is outside every fusion scope";
    case CutReason::kStreamLimit:
      return "the next op runs on another stream and stream fusion is off";
    case CutReason::kScopeBypassed:
      return "strict-scope-check=bypass turned the scope off";
    case CutReason::kSplitMode:
      return "split-mode divides the segment here";
    case CutReason::kTilingSink:
      return "the next op is a tiling-sink kernel and tiling-sink is off: it runs unfused, tiled in its own launch";
    case CutReason::kCommunication:
      return "the next op is communication that does not fuse (only the four collectives do): it runs in its own "
             "launch";
  }
  return "?";
}

namespace {

// The layer a scope belongs to: i of "scope_{i}_...", -1 otherwise.
int layer_of(const std::string& scope) {
  int layer = -1;
  if (std::sscanf(scope.c_str(), "scope_%d_", &layer) != 1) return -1;
  return layer;
}

// "core 0: 12 RUN, 3 WAIT, 2 SIGNAL" per launch, from the printed per-core programs.
std::string program_summary(const std::string& program_text) {
  std::istringstream in(program_text);
  std::string line, out;
  std::map<std::string, int> counts;
  std::string core;
  auto flush = [&] {
    if (core.empty()) return;
    out += "    " + core + ":";
    for (const auto& [op, n] : counts) out += " " + std::to_string(n) + " " + op;
    out += "\n";
    counts.clear();
    core.clear();
  };
  while (std::getline(in, line)) {
    if (line.rfind("launch ", 0) == 0 || line.rfind("host ", 0) == 0) {
      flush();
      out += "  " + line.substr(0, line.find(" ops=")) + "\n";  // the op list is in the segment lines
    } else if (line.rfind("  core ", 0) == 0) {
      flush();
      core = line.substr(2, line.size() - 3);  // "core N"
    } else if (line.rfind("    ", 0) == 0) {
      counts[line.substr(4, line.find(' ', 4) - 4)]++;
    }
  }
  flush();
  return out;
}

}  // namespace

int explain_command(const ExplainArgs& args) {
  Progress progress(args.common.quiet);
  // explain compiles the decode step and runs nothing: no cache is ever written.
  auto opened = open_session(args.common, progress, {}, /*cache_copies=*/0);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  Session& s = *std::get<std::unique_ptr<Session>>(opened);
  const config::Config& cfg = s.cfg;
  const Graph& g = s.model->decode;
  const CompileOptions opts = cfg.compile_options(cfg.exe_mode);
  progress.update("compiling the decode step");
  auto exe = s.runtime->compile(g, opts);
  if (!exe) {
    progress.done();
    const Status st = locate_compile_error(cfg, g, exe.status());
    return fail(st, failure_code(cfg, st));
  }
  const CompileReport& rep = (*exe)->report();
  progress.done();

  std::printf("model %s (%s): decode step, mode %s, %d cores, %zu ops, %zu launches per step\n", s.model->name.c_str(),
              cfg.file.c_str(), execution_mode_name(rep.mode), s.runtime->num_cores(), rep.num_ops, rep.num_launches);
  if (s.comm)
    std::printf("rank %d of %d (tp %d, ep %d): this rank's share of the model, its collectives fused\n", s.comm->rank(),
                s.comm->size(), cfg.parallel.tp, cfg.parallel.ep);
  std::printf("%s", memory_plan(*s.model, {{"decode", exe->get()}}).c_str());
  // Streams and the core limits their ops run under.
  std::map<int32_t, std::set<std::pair<int32_t, int32_t>>> limits;
  for (size_t i = 0; i < g.num_ops(); ++i) {
    const OpInfo& op = g.op(i);
    limits[op.stream].insert({op.core_limit_cube, op.core_limit_vector});
  }
  std::printf("streams:\n");
  for (const auto& [stream, lims] : limits) {
    std::printf("  %s:", g.stream_name(stream).c_str());
    for (const auto& [cube, vector] : lims) {
      if (cube == 0 && vector == 0) {
        std::printf(" no core limit;");
      } else {
        std::printf(" core limit cube %d vector %d;", cube, vector);
      }
    }
    std::printf("\n");
  }
  if (cfg.custom.enable_multi_streams == 0 && g.num_streams() <= 1) {
    std::printf("  (enable_multi_streams is 0: the MoE branch runs in program order on the main stream)\n");
  }

  if (rep.mode != ExecutionMode::kSuperKernel) {
    std::printf("no super kernels in %s mode: every op is its own launch (set exe_mode: superkernel)\n",
                execution_mode_name(rep.mode));
  }
  int current = -2;
  for (const SegmentReport& seg : rep.segments) {
    const int layer = layer_of(seg.scope);
    if (layer != current) {
      current = layer;
      if (layer >= 0) {
        std::printf("layer %d:\n", layer);
      } else {
        std::printf("outside the layers:\n");
      }
    }
    std::printf("  segment %d %-22s %3zu ops on %d cores; cut: %s", seg.id, seg.scope.c_str(), seg.ops.size(),
                seg.num_cores, plain_words(seg.cut));
    if (seg.cut_op >= 0) std::printf(" ('%s')", g.op(seg.cut_op).name.c_str());
    if (!seg.cut_detail.empty()) std::printf(" [%s]", seg.cut_detail.c_str());
    std::printf("\n");
    for (const std::string& p : seg.partitions) std::printf("    partition %s\n", p.c_str());
    for (const std::string& c : seg.collectives) std::printf("    collective: %s\n", c.c_str());
    for (const std::string& p : seg.sync_points) std::printf("    cross-stream sync: %s\n", p.c_str());
    if (!seg.schedule.empty()) std::printf("    schedule: %s\n", seg.schedule.c_str());
    for (const std::string& d : seg.recompute) std::printf("    recompute: %s\n", d.c_str());
  }
  if (!rep.unfused.empty()) {
    std::map<std::string, int> reasons;
    for (const UnfusedOp& u : rep.unfused) reasons[plain_words(u.reason)]++;
    std::printf("ops outside every super kernel:\n");
    for (const auto& [why, n] : reasons) std::printf("  %d: %s\n", n, why.c_str());
  }
  for (const std::string& w : rep.warnings) std::printf("warning: %s\n", w.c_str());

  if (args.programs) {
    auto text = explain(*s.runtime, g, opts);
    if (!text) return fail(text.status(), kExitFailed);
    std::printf("\n%s", text->c_str());
  } else if (!rep.program_text.empty()) {
    std::printf("per-core programs (instructions per core; --programs prints them all):\n%s",
                program_summary(rep.program_text).c_str());
  }
  return kExitOk;
}

}  // namespace sk::cli
