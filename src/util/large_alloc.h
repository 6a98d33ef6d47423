// Zero-filled memory for large buffers that kernels stream (weights, the arena), 64-byte aligned
// and, from kLargeAllocHugeBytes up, 2 MiB aligned and advised as transparent huge pages
// (madvise MADV_HUGEPAGE), so that streaming a weight matrix walks one TLB entry per 2 MiB
// instead of one per 4 KiB. The advice is a hint: where the kernel has transparent huge pages
// off or cannot find free 2 MiB pages, the buffer is plain 4 KiB pages (same contents, same
// results). SK_HUGE_PAGES=0 in the environment leaves the advice out (for comparisons).
//
//   void* p = sk::large_alloc(bytes);   // nullptr when out of memory
//   ...
//   std::free(p);
#ifndef SUPERKERNEL_UTIL_LARGE_ALLOC_H_
#define SUPERKERNEL_UTIL_LARGE_ALLOC_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sk {

inline constexpr size_t kLargeAllocHugeBytes = size_t{4} << 20;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

inline bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("SK_HUGE_PAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return wanted;
}

// `bytes` rounded up to a multiple of 64 (at least 64), zero-filled; free with std::free.
inline void* large_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - kHugePageBytes) return nullptr;
  const size_t rounded = bytes < 64 ? 64 : (bytes + 63) / 64 * 64;
  const bool huge = rounded >= kLargeAllocHugeBytes && huge_pages_wanted();
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePageBytes : 64, rounded) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Before the first touch, so that the faults below take huge pages; failure leaves 4 KiB pages.
  if (huge) (void)madvise(p, rounded / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  std::memset(p, 0, rounded);
  return p;
}

}  // namespace sk

#endif  // SUPERKERNEL_UTIL_LARGE_ALLOC_H_
