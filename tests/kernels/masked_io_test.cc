// The kernels' masked loads and stores (src/kernels/masked_io.h): the lanes they read and write,
// and, in the AddressSanitizer build, that a lane outside its buffer is still reported although
// the instruction itself runs uninstrumented.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/masked_io.h"

#if SK_KERNELS_X86
namespace sk::kernels {
namespace {

// The features of SK_TARGET_AVX512 (libgcc's check includes the OS saving ZMM state).
bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

SK_TARGET_AVX2 std::vector<float> avx2_prefix_copy(const float* src, int n) {
  std::vector<float> out(8, -1.0f);
  const __m256i m = simd::mask8(n);
  simd::maskstore_ps(out.data(), m, simd::maskload_ps(src, m));
  return out;
}

SK_TARGET_AVX2 void avx2_store_zeros(float* dst, int n) {
  simd::maskstore_ps(dst, simd::mask8(n), _mm256_setzero_ps());
}

SK_TARGET_AVX512 std::vector<float> avx512_prefix_copy(const float* src, int n) {
  std::vector<float> out(16, -1.0f);
  const __mmask16 m = simd::mask16(n);
  simd::masked_store_ps(out.data(), m, simd::masked_load_ps(m, src));
  return out;
}

SK_TARGET_AVX512 std::vector<uint8_t> avx512_prefix_bytes(const uint8_t* src, int n) {
  alignas(64) uint8_t out[64];
  const __mmask64 m = n == 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1u;
  _mm512_store_si512(out, simd::masked_load_epi8(m, src));
  return {out, out + 64};
}

TEST(MaskedIo, Avx2PrefixLanesAreReadAndWrittenTheRestLeftAlone) {
  // Exactly n elements on the heap, so a lane past them would be out of bounds under ASan.
  for (int n = 0; n <= 8; ++n) {
    auto src = std::make_unique<float[]>(n);
    for (int i = 0; i < n; ++i) src[i] = static_cast<float>(i + 1);
    const std::vector<float> got = avx2_prefix_copy(src.get(), n);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], i < n ? static_cast<float>(i + 1) : -1.0f) << n << " " << i;
  }
}

TEST(MaskedIo, Avx512PrefixLanesAreReadAndWrittenTheRestLeftAlone) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the 512-bit forms are left out";
  for (int n = 0; n <= 16; ++n) {
    auto src = std::make_unique<float[]>(n);
    for (int i = 0; i < n; ++i) src[i] = static_cast<float>(i + 1);
    const std::vector<float> got = avx512_prefix_copy(src.get(), n);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], i < n ? static_cast<float>(i + 1) : -1.0f) << n << " " << i;
  }
  for (int n : {0, 1, 31, 63, 64}) {
    auto src = std::make_unique<uint8_t[]>(n);
    for (int i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(200 + i);
    const std::vector<uint8_t> got = avx512_prefix_bytes(src.get(), n);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], i < n ? static_cast<uint8_t>(200 + i) : 0) << n << " " << i;
  }
}

TEST(MaskedIoDeathTest, ALaneOutsideItsBufferIsReportedUnderAsan) {
  if (!SK_KERNELS_ASAN) GTEST_SKIP() << "only the AddressSanitizer build checks masked lanes";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Seven floats, eight lanes: the load reads one float past the buffer, the store writes one.
  EXPECT_DEATH(
      {
        auto src = std::make_unique<float[]>(7);
        std::memset(src.get(), 0, 7 * sizeof(float));
        (void)avx2_prefix_copy(src.get(), 8);
      },
      "heap-buffer-overflow.*READ of size 1");
  EXPECT_DEATH(
      {
        auto dst = std::make_unique<float[]>(7);
        avx2_store_zeros(dst.get(), 8);
      },
      "heap-buffer-overflow.*WRITE of size 1");
}

}  // namespace
}  // namespace sk::kernels
#endif  // SK_KERNELS_X86
