// Where each core's time went, from a trace: compute, waits by the op waited for, barriers, idle.
#include <algorithm>
#include <cstdio>
#include <map>

#include "superkernel/trace.h"

namespace sk {
namespace {

void add_wait(std::vector<WaitTotal>& totals, const TraceEvent& e) {
  auto it = std::find_if(totals.begin(), totals.end(),
                         [&](const WaitTotal& w) { return w.op == e.op && w.producer == e.peer; });
  if (it == totals.end()) {
    totals.push_back({e.op, e.kernel, e.peer, 0, 0});
    it = totals.end() - 1;
  }
  it->ns += e.end_ns - e.start_ns;
  ++it->count;
}

void sort_longest_first(std::vector<WaitTotal>& totals) {
  std::stable_sort(totals.begin(), totals.end(), [](const WaitTotal& a, const WaitTotal& b) { return a.ns > b.ns; });
}

std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(ns) / 1e3);
  return buf;
}

}  // namespace

WaitAccount account_waits(const std::vector<TraceEvent>& events) {
  WaitAccount account;
  std::map<int32_t, std::vector<const TraceEvent*>> by_launch;
  for (const TraceEvent& e : events)
    if (e.core >= 0) by_launch[e.launch].push_back(&e);
  for (const auto& [launch, list] : by_launch) {
    LaunchTime lt;
    lt.launch = launch;
    lt.segment = list.front()->segment;
    int64_t first = list.front()->start_ns, last = list.front()->end_ns;
    std::map<int32_t, CoreTime> cores;
    for (const TraceEvent* e : list) {
      first = std::min(first, e->start_ns);
      last = std::max(last, e->end_ns);
      CoreTime& ct = cores[e->core];
      ct.core = e->core;
      const int64_t d = e->end_ns - e->start_ns;
      switch (e->kind) {
        case TraceKind::kRun:
        case TraceKind::kPrologue:
        case TraceKind::kTiling:
          ct.compute_ns += d;
          break;
        case TraceKind::kWait:
          ct.wait_ns += d;
          add_wait(lt.waits, *e);
          add_wait(account.top, *e);
          break;
        case TraceKind::kBarrier:
          ct.barrier_ns += d;
          break;
        case TraceKind::kSignal:
        case TraceKind::kHost:
          break;
      }
    }
    lt.span_ns = last - first;
    for (auto& [core, ct] : cores) {
      ct.idle_ns = std::max<int64_t>(0, lt.span_ns - ct.compute_ns - ct.wait_ns - ct.barrier_ns);
      account.compute_ns += ct.compute_ns;
      account.wait_ns += ct.wait_ns;
      account.barrier_ns += ct.barrier_ns;
      account.idle_ns += ct.idle_ns;
      lt.cores.push_back(ct);
    }
    sort_longest_first(lt.waits);
    account.launches.push_back(std::move(lt));
  }
  sort_longest_first(account.top);
  return account;
}

std::string format_waits(const WaitAccount& a, int top) {
  std::string out = "core time (us, summed over cores): compute " + us(a.compute_ns) + ", waiting " + us(a.wait_ns) +
                    ", barriers " + us(a.barrier_ns) + ", idle " + us(a.idle_ns) + "\n";
  if (a.top.empty()) return out + "no cross-core waits\n";
  out += "| waited for (op, kernel) | producer core | waits | total us |\n|---|---:|---:|---:|\n";
  for (size_t i = 0; i < a.top.size() && static_cast<int>(i) < top; ++i) {
    const WaitTotal& w = a.top[i];
    out += "| " + (w.op.empty() ? std::string("?") : w.op) + " (" + w.kernel + ") | " + std::to_string(w.producer) +
           " | " + std::to_string(w.count) + " | " + us(w.ns) + " |\n";
  }
  return out;
}

}  // namespace sk
