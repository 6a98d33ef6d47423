// `superkernel report`: one self-contained HTML page (inline CSS and SVG, no network access) with
// the per-core timeline of one decode step in every mode on one time axis, waits highlighted, the
// segment table with cut reasons, step times and the wait accounting.
#include <algorithm>
#include <cstdio>
#include <string>

#include "bench_common.h"
#include "superkernel/output_file.h"
#include "trace_capture.h"

namespace sk::cli {
namespace {

constexpr double kTimelineWidth = 1100;  // px for the longest step
constexpr double kLabelWidth = 90;
constexpr double kRowHeight = 18;

std::string html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string us(int64_t ns) { return fmt("%.1f", static_cast<double>(ns) / 1e3); }

const char* colour(TraceKind k) {
  switch (k) {
    case TraceKind::kRun:
      return "#4a7fd4";
    case TraceKind::kPrologue:
      return "#8fb3ea";
    case TraceKind::kTiling:
      return "#9b6fd1";
    case TraceKind::kWait:
      return "#e0403a";
    case TraceKind::kBarrier:
      return "#f0a030";
    case TraceKind::kHost:
      return "#888888";
    case TraceKind::kSignal:
      return "#2a9d4a";
  }
  return "#000";
}

std::string event_title(const TraceEvent& e) {
  std::string t = std::string(trace_kind_name(e.kind)) + " " + e.op;
  if (!e.kernel.empty()) t += " (" + e.kernel + ")";
  if (e.kind == TraceKind::kWait) t += " from core " + std::to_string(e.peer);
  if (e.kind == TraceKind::kBarrier) t += " group " + std::to_string(e.peer);
  return t + ": " + fmt("%.1f", static_cast<double>(e.end_ns - e.start_ns) / 1e3) + " us at " +
         fmt("%.1f", static_cast<double>(e.start_ns) / 1e3) + " us";
}

// One SVG per mode, all scaled to the longest step so they share the time axis.
std::string timeline(const TracedMode& t, int64_t longest_ns) {
  int max_core = -1;
  bool host = false;
  for (const TraceEvent& e : t.trace) {
    max_core = std::max(max_core, e.core);
    host |= e.core < 0;
  }
  const int first_core = host ? -1 : 0;  // a host row only when host ops ran
  const int rows = max_core + 1 - first_core;
  const double height = rows * kRowHeight + 20;
  const double scale = kTimelineWidth / static_cast<double>(std::max<int64_t>(longest_ns, 1));
  std::string svg = "<svg class=\"timeline\" data-mode=\"" + std::string(execution_mode_name(t.mode)) + "\" width=\"" +
                    fmt("%.0f", kLabelWidth + kTimelineWidth + 40) + "\" height=\"" + fmt("%.0f", height) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  for (int row = 0; row < rows; ++row) {
    const int core = row + first_core;
    const double y = row * kRowHeight;
    svg += "<g class=\"track\" data-core=\"" + std::to_string(core) + "\"><text x=\"4\" y=\"" + fmt("%.0f", y + 13) +
           "\">" + (core < 0 ? std::string("host") : "core " + std::to_string(core)) + "</text>";
    for (const TraceEvent& e : t.trace) {
      if (e.core != core || e.kind == TraceKind::kSignal) continue;
      const double x = kLabelWidth + static_cast<double>(e.start_ns) * scale;
      const double w = std::max(0.5, static_cast<double>(e.end_ns - e.start_ns) * scale);
      const bool wait = e.kind == TraceKind::kWait || e.kind == TraceKind::kBarrier;
      svg += "<rect class=\"" + std::string(trace_kind_name(e.kind)) + "\" x=\"" + fmt("%.2f", x) + "\" y=\"" +
             fmt("%.1f", y + (wait ? 1 : 3)) + "\" width=\"" + fmt("%.2f", w) + "\" height=\"" +
             fmt("%.1f", wait ? kRowHeight - 2 : kRowHeight - 6) + "\" fill=\"" + colour(e.kind) + "\"><title>" +
             html(event_title(e)) + "</title></rect>";
    }
    svg += "</g>\n";
  }
  // Time axis: a tick every tenth of the longest step.
  const double axis_y = rows * kRowHeight + 12;
  for (int i = 0; i <= 10; ++i) {
    const double x = kLabelWidth + kTimelineWidth * i / 10.0;
    svg += "<text class=\"tick\" x=\"" + fmt("%.0f", x) + "\" y=\"" + fmt("%.0f", axis_y) + "\">" +
           fmt("%.0f", static_cast<double>(longest_ns) * i / 10.0 / 1e3) + (i == 10 ? " µs" : "") + "</text>";
  }
  return svg + "</svg>\n";
}

std::string segment_table(const TracedMode& t, const Graph& g) {
  if (t.report.segments.empty())
    return "<p>No super kernels in " + std::string(execution_mode_name(t.mode)) + " mode.</p>";
  std::string out = "<table><tr><th>segment</th><th>scope</th><th>ops</th><th>cores</th><th>cut because</th></tr>\n";
  for (const SegmentReport& seg : t.report.segments) {
    std::string why = plain_words(seg.cut);
    if (seg.cut_op >= 0) why += " ('" + g.op(seg.cut_op).name + "')";
    if (!seg.cut_detail.empty()) why += " [" + seg.cut_detail + "]";
    out += "<tr><td>" + std::to_string(seg.id) + "</td><td>" + html(seg.scope) + "</td><td>" +
           std::to_string(seg.ops.size()) + "</td><td>" + std::to_string(seg.num_cores) + "</td><td>" + html(why) +
           "</td></tr>\n";
  }
  return out + "</table>\n";
}

std::string wait_tables(const TracedMode& t) {
  const WaitAccount a = account_waits(t.trace);
  std::string out = "<h3>" + std::string(execution_mode_name(t.mode)) +
                    "</h3>\n<p>core time, summed over cores: compute " + us(a.compute_ns) + " µs, waiting " +
                    us(a.wait_ns) + " µs, barriers " + us(a.barrier_ns) + " µs, idle " + us(a.idle_ns) + " µs</p>\n";
  if (!a.top.empty()) {
    out +=
        "<table class=\"waits\"><tr><th>waited for (op, kernel)</th><th>producer core</th><th>waits</th><th>total "
        "µs</th></tr>\n";
    for (size_t i = 0; i < a.top.size() && i < 10; ++i) {
      const WaitTotal& w = a.top[i];
      out += "<tr><td>" + html(w.op + " (" + w.kernel + ")") + "</td><td>" + std::to_string(w.producer) + "</td><td>" +
             std::to_string(w.count) + "</td><td>" + us(w.ns) + "</td></tr>\n";
    }
    out += "</table>\n";
  }
  out +=
      "<details><summary>per launch and core</summary><table><tr><th>launch</th><th>segment</th><th>span "
      "µs</th><th>core</th><th>compute</th><th>wait</th><th>barrier</th><th>idle</th></tr>\n";
  for (const LaunchTime& lt : a.launches) {
    for (const CoreTime& c : lt.cores) {
      out += "<tr><td>" + std::to_string(lt.launch) + "</td><td>" + std::to_string(lt.segment) + "</td><td>" +
             us(lt.span_ns) + "</td><td>" + std::to_string(c.core) + "</td><td>" + us(c.compute_ns) + "</td><td>" +
             us(c.wait_ns) + "</td><td>" + us(c.barrier_ns) + "</td><td>" + us(c.idle_ns) + "</td></tr>\n";
    }
  }
  return out + "</table></details>\n";
}

constexpr const char* kStyle = R"(<style>
body { font: 14px sans-serif; margin: 20px; color: #222; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
svg.timeline text { font: 11px sans-serif; }
svg.timeline text.tick { fill: #666; text-anchor: middle; }
.legend span { display: inline-block; padding: 0 8px; margin-right: 6px; color: #fff; }
</style>
)";

}  // namespace

int report_command(const TraceArgs& args) {
  Progress progress(args.common.quiet);
  auto opened = open_session(args.common, progress);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  const Session& s = *std::get<std::unique_ptr<Session>>(opened);
  const int runs = std::max(1, s.cfg.bench.runs);
  auto traced = trace_modes(s, args.mode, runs, progress);
  progress.done();
  if (!traced) return fail(traced.status(), failure_code(s.cfg, traced.status()));

  int64_t longest = 1;
  for (const TracedMode& t : *traced)
    for (const TraceEvent& e : t.trace) longest = std::max(longest, e.end_ns);
  std::string page =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>superkernel report: " + html(s.model->name) +
      "</title>\n" + kStyle + "</head><body>\n";
  page += "<h1>" + html(s.model->name) + ": one decode step</h1>\n<p>config " + html(s.cfg.file) + "; " +
          std::to_string(s.runtime->num_cores()) + " cores, isa " + Runtime::cpu_isa() + "</p>\n";
  page += "<h2>Timeline</h2>\n<p class=\"legend\">";
  for (TraceKind k : {TraceKind::kRun, TraceKind::kPrologue, TraceKind::kTiling, TraceKind::kWait, TraceKind::kBarrier,
                      TraceKind::kHost})
    page += "<span style=\"background:" + std::string(colour(k)) + "\">" + trace_kind_name(k) + "</span>";
  page +=
      "</p>\n<p>Every mode on one time axis (µs from the start of the step); hover a box for its op, kernel and "
      "duration.</p>\n";
  for (const TracedMode& t : *traced)
    page += "<h3>" + std::string(execution_mode_name(t.mode)) + "</h3>\n" + timeline(t, longest);

  page += "<h2>Step time</h2>\n<table><tr><th>mode</th><th>step ms (median of " + std::to_string(runs) +
          ", traced; the timeline shows the fastest)</th><th>vs first</th></tr>\n";
  const double first = bench::stats_of(traced->front().step_s).median;
  for (const TracedMode& t : *traced) {
    const double median = bench::stats_of(t.step_s).median;
    page += "<tr><td>" + std::string(execution_mode_name(t.mode)) + "</td><td>" + fmt("%.3f", median * 1e3) +
            "</td><td>" + fmt("%.2f", median / first) + "</td></tr>\n";
  }
  page += "</table>\n<h2>Segments</h2>\n";
  for (const TracedMode& t : *traced)
    if (t.mode == ExecutionMode::kSuperKernel || traced->size() == 1) page += segment_table(t, s.model->decode);
  page += "<h2>Where the cores wait</h2>\n";
  for (const TracedMode& t : *traced) page += wait_tables(t);
  page += "</body></html>\n";

  if (Status w = write_file(args.output, page); !w) return fail(w.with_context("report file"), kExitFailed);
  std::printf("wrote %s (%zu mode(s)); open it in a browser\n", args.output.c_str(), traced->size());
  return kExitOk;
}

}  // namespace sk::cli
