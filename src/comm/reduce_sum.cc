#include "comm/reduce_sum.h"

namespace sk::comm {
namespace {

// Blocks of kBlock elements: every source's block is read before the block is stored, so `out`
// may be one of the sources (an in-place all-reduce), and the inner loops vectorise.
constexpr int64_t kBlock = 256;

template <typename T, typename Load, typename Store>
void reduce_blocks(const void* const* src, int32_t n, void* out, int64_t count, Load load, Store store) {
  float acc[kBlock];
  for (int64_t b = 0; b < count; b += kBlock) {
    const int64_t m = count - b < kBlock ? count - b : kBlock;
    const T* s0 = static_cast<const T*>(src[0]) + b;
    for (int64_t i = 0; i < m; ++i) acc[i] = load(s0[i]);
    for (int32_t s = 1; s < n; ++s) {
      const T* p = static_cast<const T*>(src[s]) + b;
      for (int64_t i = 0; i < m; ++i) acc[i] += load(p[i]);
    }
    T* o = static_cast<T*>(out) + b;
    for (int64_t i = 0; i < m; ++i) o[i] = store(acc[i]);
  }
}

void reduce_i32(const void* const* src, int32_t n, void* out, int64_t count) {
  uint32_t acc[kBlock];
  for (int64_t b = 0; b < count; b += kBlock) {
    const int64_t m = count - b < kBlock ? count - b : kBlock;
    const auto* s0 = static_cast<const uint32_t*>(src[0]) + b;
    for (int64_t i = 0; i < m; ++i) acc[i] = s0[i];
    for (int32_t s = 1; s < n; ++s) {
      const auto* p = static_cast<const uint32_t*>(src[s]) + b;
      for (int64_t i = 0; i < m; ++i) acc[i] += p[i];  // unsigned: wraps, as documented
    }
    auto* o = static_cast<uint32_t*>(out) + b;
    for (int64_t i = 0; i < m; ++i) o[i] = acc[i];
  }
}

}  // namespace

void reduce_sum(int32_t dtype, const void* const* src, int32_t n, void* out, int64_t count) {
  switch (dtype) {
    case SK_DTYPE_F32:
      reduce_blocks<float>(
          src, n, out, count, [](float v) { return v; }, [](float v) { return v; });
      break;
    case SK_DTYPE_BF16:
      reduce_blocks<uint16_t>(src, n, out, count, bf16_to_f32, f32_to_bf16);
      break;
    case SK_DTYPE_F16:
      reduce_blocks<uint16_t>(src, n, out, count, f16_to_f32, f32_to_f16);
      break;
    case SK_DTYPE_I32:
      reduce_i32(src, n, out, count);
      break;
    default:
      break;
  }
}

}  // namespace sk::comm
