// A map from disjoint byte intervals [begin, end) to the last op that touched them. paint()
// overwrites what it covers (splitting partially covered intervals); latest() returns the
// newest op over any overlap. Used by the scheduler to find, per core, the last writer and the
// last reader of every byte.
#ifndef SUPERKERNEL_COMPILER_INTERVAL_MAP_H_
#define SUPERKERNEL_COMPILER_INTERVAL_MAP_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

namespace sk {

class IntervalMap {
 public:
  // Marks [begin, end) as last touched by `op`. Ops are painted in increasing order.
  void paint(uint64_t begin, uint64_t end, int32_t op) {
    if (begin >= end) return;
    auto it = map_.upper_bound(begin);
    if (it != map_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.end > begin) it = prev;
    }
    while (it != map_.end() && it->first < end) {
      const uint64_t b = it->first, e = it->second.end;
      const int32_t old = it->second.op;
      it = map_.erase(it);
      if (b < begin) map_.emplace(b, Span{begin, old});
      if (e > end) {
        map_.emplace(end, Span{e, old});
        break;
      }
    }
    map_.emplace(begin, Span{end, op});
  }

  // Newest op overlapping [begin, end), or -1.
  int32_t latest(uint64_t begin, uint64_t end) const {
    int32_t best = -1;
    if (begin >= end) return best;
    auto it = map_.upper_bound(begin);
    if (it != map_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.end > begin) it = prev;
    }
    for (; it != map_.end() && it->first < end; ++it) best = std::max(best, it->second.op);
    return best;
  }

  size_t size() const { return map_.size(); }

 private:
  struct Span {
    uint64_t end;
    int32_t op;
  };
  std::map<uint64_t, Span> map_;
};

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_INTERVAL_MAP_H_
