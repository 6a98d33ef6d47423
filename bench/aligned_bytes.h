// Byte buffers aligned to 64 bytes, as the runtime's memory plan and weight arena align every
// tensor, for the operands benchmarks hand to kernels: a weight row that starts mid-line costs
// an AMX tile row two cache lines (the amx level's bf16 GEMV took 1649 instead of 1303 us, one
// core, 4096 x 4096, rows 16 bytes off).
//
//   sk::bench::AlignedBytes w(bytes);  // w.data() % 64 == 0
#ifndef SUPERKERNEL_BENCH_ALIGNED_BYTES_H_
#define SUPERKERNEL_BENCH_ALIGNED_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace sk::bench {

template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  explicit Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const Aligned64&) const { return true; }
};

using AlignedBytes = std::vector<uint8_t, Aligned64<uint8_t>>;

}  // namespace sk::bench

#endif  // SUPERKERNEL_BENCH_ALIGNED_BYTES_H_
