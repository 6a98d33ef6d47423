// Chrome trace-event JSON of traced runs (the format chrome://tracing and ui.perfetto.dev read).
#include <cstdio>
#include <map>
#include <utility>

#include "superkernel/output_file.h"
#include "superkernel/trace.h"

namespace sk {
namespace {

constexpr int kHostTid = 1000;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1e3);
  return buf;
}

std::string label(const TraceEvent& e) {
  const std::string op = e.kernel.empty() ? e.op : e.op + " (" + e.kernel + ")";
  switch (e.kind) {
    case TraceKind::kRun:
      return op;
    case TraceKind::kPrologue:
      return "prologue " + op;
    case TraceKind::kTiling:
      return "tiling " + op;
    case TraceKind::kWait:
      return "wait " + (e.op.empty() ? std::string("signal ") + std::to_string(e.count) : e.op) + " @core " +
             std::to_string(e.peer);
    case TraceKind::kSignal:
      return "signal " + std::to_string(e.count) + (e.op.empty() ? "" : " after " + e.op);
    case TraceKind::kBarrier:
      return "barrier group " + std::to_string(e.peer);
    case TraceKind::kHost:
      return e.op + " (host)";
  }
  return op;
}

int tid_of(const TraceEvent& e) { return e.core < 0 ? kHostTid : e.core; }

}  // namespace

std::string chrome_trace_json(const std::vector<TraceRun>& runs) {
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& event) {
    if (!first) out += ",\n";
    first = false;
    out += event;
  };
  int64_t flow_id = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string pid = std::to_string(r + 1);
    emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid +
         ",\"tid\":0,\"args\":{\"name\":" + quoted(runs[r].label) + "}}");
    emit("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"sort_index\":" + pid +
         "}}");
    std::map<int, bool> tids;
    for (const TraceEvent& e : runs[r].events) tids[tid_of(e)] = true;
    for (const auto& [tid, unused] : tids) {
      const std::string name = tid == kHostTid ? "host" : "core " + std::to_string(tid);
      emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":" + quoted(name) + "}}");
    }
    // (launch, core) -> that core's signals in the launch by count: the signal that released a
    // wait is the first one whose count reaches the count waited for.
    std::map<std::pair<int32_t, int32_t>, std::map<int32_t, const TraceEvent*>> signals;
    for (const TraceEvent& e : runs[r].events)
      if (e.kind == TraceKind::kSignal) signals[{e.launch, e.core}].emplace(e.count, &e);
    for (const TraceEvent& e : runs[r].events) {
      std::string args = "\"op\":" + quoted(e.op) + ",\"kernel\":" + quoted(e.kernel) +
                         ",\"launch\":" + std::to_string(e.launch) + ",\"segment\":" + std::to_string(e.segment);
      if (e.kind == TraceKind::kWait)
        args += ",\"producer_core\":" + std::to_string(e.peer) + ",\"signal\":" + std::to_string(e.count);
      if (e.kind == TraceKind::kSignal) args += ",\"signal\":" + std::to_string(e.count);
      if (e.kind == TraceKind::kBarrier) args += ",\"group\":" + std::to_string(e.peer);
      emit("{\"ph\":\"X\",\"name\":" + quoted(label(e)) + ",\"cat\":\"" + trace_kind_name(e.kind) +
           "\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid_of(e)) + ",\"ts\":" + micros(e.start_ns) +
           ",\"dur\":" + micros(e.end_ns - e.start_ns) + ",\"args\":{" + args + "}}");
    }
    for (const TraceEvent& e : runs[r].events) {
      if (e.kind != TraceKind::kWait) continue;
      auto core = signals.find({e.launch, e.peer});
      if (core == signals.end()) continue;
      auto it = core->second.lower_bound(e.count);
      if (it == core->second.end()) continue;
      const TraceEvent& signal = *it->second;
      const std::string id = std::to_string(++flow_id);
      const std::string name = quoted("signal " + std::to_string(e.count));
      // The arrow starts at the signal (bound to its instant slice) and ends where the waiting
      // core proceeds: at the end of its wait, bound to the next slice it runs ("f" without
      // "bp":"e"). Ending at the start of the wait would point back in time whenever the core
      // began waiting before the producer signalled. The waiting core reads its clock after it
      // has seen the signal, which the producer published after reading its own, so the end is
      // never before the start.
      emit("{\"ph\":\"s\",\"name\":" + name + ",\"cat\":\"sync\",\"id\":" + id + ",\"pid\":" + pid +
           ",\"tid\":" + std::to_string(tid_of(signal)) + ",\"ts\":" + micros(signal.start_ns) + "}");
      emit("{\"ph\":\"f\",\"name\":" + name + ",\"cat\":\"sync\",\"id\":" + id + ",\"pid\":" + pid +
           ",\"tid\":" + std::to_string(tid_of(e)) + ",\"ts\":" + micros(e.end_ns) + "}");
    }
  }
  return out + "\n]}\n";
}

Status write_chrome_trace(const std::string& path, const std::vector<TraceRun>& runs) {
  return write_file(path, chrome_trace_json(runs)).with_context("trace file");
}

}  // namespace sk
