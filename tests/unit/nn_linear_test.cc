// sk::nn::linear on f16 and group-wise 4-bit weights, and sk::nn::quantize_int4: the packed
// layout it writes, its error bound, its argument errors, and the graphs linear() builds from its
// results in every execution mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/test_runtime.h"
#include "superkernel/nn.h"
#include "superkernel/runtime.h"
#include "util/half.h"

namespace sk {
namespace {

constexpr ExecutionMode kModes[] = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};

// The weight of (n, k) that the kernels multiply by: s * (q - z), from the packed layout.
float dequant(const nn::Int4Weights& q, int64_t n, int64_t k) {
  const uint8_t byte = q.packed[static_cast<size_t>(n * q.in / 2 + k / 2)];
  const int v = k % 2 == 0 ? byte & 0xF : byte >> 4;
  const int64_t g = k / q.group;
  const size_t at = static_cast<size_t>(g * q.out + n);
  float s;
  if (q.scale_dtype == DType::kF16) {
    uint16_t h;
    std::memcpy(&h, q.scale.data() + 2 * at, 2);
    s = f16_to_f32(h);
  } else {
    std::memcpy(&s, q.scale.data() + 4 * at, 4);
  }
  const int z = q.zero.empty() ? 8 : q.zero[at];
  return s * static_cast<float>(v - z);
}

float scale_of(const nn::Int4Weights& q, int64_t n, int64_t g) {
  const size_t at = static_cast<size_t>(g * q.out + n);
  if (q.scale_dtype == DType::kF16) {
    uint16_t h;
    std::memcpy(&h, q.scale.data() + 2 * at, 2);
    return f16_to_f32(h);
  }
  float s;
  std::memcpy(&s, q.scale.data() + 4 * at, 4);
  return s;
}

TEST(QuantizeInt4, PacksNibblesInKOrderWithGroupMajorScales) {
  // Row 0 of group 0 holds the 16 values -8..7 times 0.5 (and 0 for the rest): symmetric, the
  // largest magnitude is -4, so s = 0.5 and q = x / 0.5 + 8 = 0..15 in k order.
  const int64_t out = 2, in = 32;
  std::vector<float> w(static_cast<size_t>(out * in), 0.0f);
  for (int k = 0; k < 16; ++k) w[static_cast<size_t>(k)] = 0.5f * static_cast<float>(k - 8);
  auto q = nn::quantize_int4(w.data(), DType::kF32, out, in,
                             {.group = 32, .zero_points = false, .scale_dtype = DType::kF32});
  ASSERT_TRUE(q) << q.status().to_string();
  ASSERT_EQ(q->packed.size(), static_cast<size_t>(out * in / 2));
  EXPECT_TRUE(q->zero.empty());
  EXPECT_EQ(scale_of(*q, 0, 0), 0.5f);
  for (int j = 0; j < 8; ++j) {
    // byte j: k = 2j (low 4 bits) and 2j + 1 (high 4 bits)
    EXPECT_EQ(q->packed[static_cast<size_t>(j)], static_cast<uint8_t>((2 * j) | ((2 * j + 1) << 4))) << j;
  }
  for (int j = 8; j < 16; ++j) EXPECT_EQ(q->packed[static_cast<size_t>(j)], 0x88) << j;  // zeros: q = 8
  // Row 1 is all zeros: scale 0, every value at the zero point.
  EXPECT_EQ(scale_of(*q, 1, 0), 0.0f);
  for (int k = 0; k < in; ++k) EXPECT_EQ(dequant(*q, 1, k), 0.0f);
}

TEST(QuantizeInt4, ErrorIsWithinAStepForEveryDtypeAndForm) {
  const int64_t out = 5, in = 256;
  const std::vector<float> w = testing::random_floats(static_cast<size_t>(out * in), 7, -2.0f, 3.0f);
  std::vector<uint16_t> wb(w.size());
  std::vector<uint16_t> wh(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    wb[i] = f32_to_bf16(w[i]);
    wh[i] = f32_to_f16(w[i]);
  }
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (bool zeros : {true, false}) {
      for (int64_t group : {32, 64, 128}) {
        for (DType sd : {DType::kF32, DType::kF16}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + (zeros ? " asymmetric" : " symmetric") + " G " +
                       std::to_string(group) + " scales " + dtype_name(sd));
          const void* src = dtype == DType::kF32    ? static_cast<const void*>(w.data())
                            : dtype == DType::kBF16 ? static_cast<const void*>(wb.data())
                                                    : static_cast<const void*>(wh.data());
          auto q = nn::quantize_int4(src, dtype, out, in, {.group = group, .zero_points = zeros, .scale_dtype = sd});
          ASSERT_TRUE(q) << q.status().to_string();
          EXPECT_EQ(q->zero.size(), zeros ? static_cast<size_t>(out * in / group) : size_t{0});
          for (int64_t n = 0; n < out; ++n) {
            for (int64_t k = 0; k < in; ++k) {
              const float x = dtype == DType::kF32    ? w[static_cast<size_t>(n * in + k)]
                              : dtype == DType::kBF16 ? bf16_to_f32(wb[static_cast<size_t>(n * in + k)])
                                                      : f16_to_f32(wh[static_cast<size_t>(n * in + k)]);
              const float s = std::fabs(scale_of(*q, n, k / group));
              // Half a step from rounding, plus up to a step where the range's end is clipped.
              ASSERT_LE(std::fabs(dequant(*q, n, k) - x), 1.5f * s + 1e-6f) << n << ", " << k;
            }
          }
        }
      }
    }
  }
}

TEST(QuantizeInt4, ArgumentErrorsNameTheArgument) {
  const std::vector<float> w(64, 1.0f);
  auto bad_group = nn::quantize_int4(w.data(), DType::kF32, 1, 64, {.group = 48});
  ASSERT_FALSE(bad_group);
  EXPECT_NE(bad_group.status().to_string().find("group 48"), std::string::npos) << bad_group.status().to_string();
  auto bad_in = nn::quantize_int4(w.data(), DType::kF32, 2, 32, {.group = 64});
  ASSERT_FALSE(bad_in);
  EXPECT_NE(bad_in.status().to_string().find("in = 32"), std::string::npos) << bad_in.status().to_string();
  auto bad_dtype = nn::quantize_int4(w.data(), DType::kI8, 1, 64, {.group = 32});
  ASSERT_FALSE(bad_dtype);
  EXPECT_NE(bad_dtype.status().to_string().find("dtype"), std::string::npos) << bad_dtype.status().to_string();
  auto bad_scale = nn::quantize_int4(w.data(), DType::kF32, 1, 64, {.group = 32, .scale_dtype = DType::kBF16});
  ASSERT_FALSE(bad_scale);
  EXPECT_NE(bad_scale.status().to_string().find("scale_dtype"), std::string::npos) << bad_scale.status().to_string();
}

// linear() on int4 constants: matmul.w4 is x times the dequantised weights (f32 accuracy),
// matmul.w4a8_dyn that with x quantised per row (within int8 rounding of x); every mode gives
// the same bits.
TEST(NnLinear, Int4WeightsInEveryMode) {
  const int64_t t = 3, out = 40, in = 256;
  const std::vector<float> w = testing::random_floats(static_cast<size_t>(out * in), 11);
  const std::vector<float> x = testing::random_floats(static_cast<size_t>(t * in), 12);
  auto q = nn::quantize_int4(w.data(), DType::kF32, out, in, {.group = 64});
  ASSERT_TRUE(q) << q.status().to_string();
  auto rt = testing::make_runtime(2);
  for (bool f32_activations : {true, false}) {
    SCOPED_TRACE(f32_activations ? "matmul.w4" : "matmul.w4a8_dyn");
    Graph g("int4_linear");
    Tensor xt = g.input("x", DType::kF32, {t, in});
    const nn::Linear proj = nn::int4_constants(g, "proj", *q, f32_activations);
    g.output(nn::linear(g, xt, proj), "y");
    std::vector<uint8_t> first;
    for (ExecutionMode mode : kModes) {
      auto exe = rt->compile(g, CompileOptions::for_mode(mode));
      ASSERT_TRUE(exe) << exe.status().to_string();
      ASSERT_TRUE((*exe)->set_input("x", x).is_ok());
      ASSERT_TRUE((*exe)->run().is_ok());
      const std::vector<float> y = (*exe)->output_f32("y");
      std::vector<uint8_t> bytes(y.size() * 4);
      std::memcpy(bytes.data(), y.data(), bytes.size());
      if (first.empty()) first = bytes;
      EXPECT_EQ(bytes, first) << "mode " << static_cast<int>(mode);
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t n = 0; n < out; ++n) {
          double want = 0.0;
          double mag = 0.0;
          for (int64_t k = 0; k < in; ++k) {
            const double p = static_cast<double>(x[static_cast<size_t>(i * in + k)]) * dequant(*q, n, k);
            want += p;
            mag += std::fabs(p);
          }
          // int8 activations: each x is off by at most half of max|x| / 127.
          const double tol = f32_activations ? 1e-4 + 1e-4 * std::fabs(want) : 1e-4 + mag / 127.0;
          EXPECT_NEAR(y[static_cast<size_t>(i * out + n)], want, tol) << i << ", " << n;
        }
      }
    }
  }
}

// tile_int4: the tiled layout of the same weights gives the row layout's bits through both 4-bit
// kernels in every mode (K = 160 ends inside a 128-k step), and rejects what it cannot tile.
TEST(NnLinear, TiledInt4GivesTheRowLayoutsBitsInEveryMode) {
  const int64_t t = 3, out = 48, in = 160;
  const std::vector<float> w = testing::random_floats(static_cast<size_t>(out * in), 31);
  const std::vector<float> x = testing::random_floats(static_cast<size_t>(t * in), 32);
  auto rt = testing::make_runtime(2);
  for (bool zero_points : {true, false}) {
    auto q = nn::quantize_int4(w.data(), DType::kF32, out, in, {.group = 32, .zero_points = zero_points});
    ASSERT_TRUE(q) << q.status().to_string();
    auto tiled = nn::tile_int4(*q);
    ASSERT_TRUE(tiled) << tiled.status().to_string();
    EXPECT_TRUE(tiled->tiled);
    EXPECT_EQ(nn::int4_weight_shape(*tiled), (Shape{3, 2, 16, 64}));
    EXPECT_EQ(nn::int4_group_shape(*tiled), (Shape{3, 5, 16}));
    // Row 21's byte 70 (k = 140, 141) sits in tile 1, step 1, row 5, byte 6; its group 4 scale at [1, 4, 5].
    EXPECT_EQ(tiled->packed[static_cast<size_t>(((1 * 2 + 1) * 16 + 5) * 64 + 6)], q->packed[21 * 80 + 70]);
    EXPECT_EQ(0,
              std::memcmp(tiled->scale.data() + ((1 * 5 + 4) * 16 + 5) * 2, q->scale.data() + (4 * out + 21) * 2, 2));
    for (bool f32_activations : {true, false}) {
      SCOPED_TRACE(std::string(f32_activations ? "matmul.w4" : "matmul.w4a8_dyn") +
                   (zero_points ? ", zero points" : ", symmetric"));
      Graph g("tiled_int4_linear");
      Tensor xt = g.input("x", DType::kF32, {t, in});
      g.output(nn::linear(g, xt, nn::int4_constants(g, "rows", *q, f32_activations)), "rows");
      g.output(nn::linear(g, xt, nn::int4_constants(g, "tiles", *tiled, f32_activations)), "tiles");
      for (ExecutionMode mode : kModes) {
        auto exe = rt->compile(g, CompileOptions::for_mode(mode));
        ASSERT_TRUE(exe) << exe.status().to_string();
        ASSERT_TRUE((*exe)->set_input("x", x).is_ok());
        ASSERT_TRUE((*exe)->run().is_ok());
        const std::vector<float> rows = (*exe)->output_f32("rows");
        const std::vector<float> tiles = (*exe)->output_f32("tiles");
        ASSERT_EQ(rows.size(), static_cast<size_t>(t * out));
        EXPECT_EQ(0, std::memcmp(rows.data(), tiles.data(), rows.size() * 4)) << "mode " << static_cast<int>(mode);
      }
    }
    auto again = nn::tile_int4(*tiled);
    ASSERT_FALSE(again);
    EXPECT_NE(again.status().message().find("tiled already"), std::string::npos) << again.status().to_string();
  }
  auto q40 = nn::quantize_int4(w.data(), DType::kF32, 40, in, {.group = 32});
  ASSERT_TRUE(q40);
  auto odd = nn::tile_int4(*q40);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.status().message().find("out = 40 is not a multiple of 16"), std::string::npos)
      << odd.status().to_string();
}

// f16 weights go to matmul.f16, which equals the f32 product of the widened weights.
TEST(NnLinear, F16Weights) {
  const int64_t t = 2, out = 33, in = 70;
  const std::vector<float> w = testing::random_floats(static_cast<size_t>(out * in), 21);
  const std::vector<float> x = testing::random_floats(static_cast<size_t>(t * in), 22);
  std::vector<uint16_t> wh(w.size());
  for (size_t i = 0; i < w.size(); ++i) wh[i] = f32_to_f16(w[i]);
  auto rt = testing::make_runtime(2);
  Graph g("f16_linear");
  Tensor xt = g.input("x", DType::kF32, {t, in});
  const nn::Linear proj{g.constant("proj", DType::kF16, {out, in}, wh.data(), wh.size() * 2)};
  g.output(nn::linear(g, xt, proj), "y");
  auto exe = rt->compile(g, CompileOptions::for_mode(ExecutionMode::kGraph));
  ASSERT_TRUE(exe) << exe.status().to_string();
  ASSERT_TRUE((*exe)->set_input("x", x).is_ok());
  ASSERT_TRUE((*exe)->run().is_ok());
  const std::vector<float> y = (*exe)->output_f32("y");
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t n = 0; n < out; ++n) {
      double want = 0.0;
      for (int64_t k = 0; k < in; ++k) {
        want +=
            static_cast<double>(x[static_cast<size_t>(i * in + k)]) * f16_to_f32(wh[static_cast<size_t>(n * in + k)]);
      }
      EXPECT_NEAR(y[static_cast<size_t>(i * out + n)], want, 1e-4) << i << ", " << n;
    }
  }
}

}  // namespace
}  // namespace sk
