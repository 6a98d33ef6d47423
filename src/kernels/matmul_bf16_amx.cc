// matmul.bf16 on AMX tiles (level amx): C = w · xᵀ, 16 outputs by 16 rows of x per tile.
//
// Numerics: x is rounded to bf16 as at avx512_bf16 (VCVTNE2PS2BF16, nearest even), then every y
// element is one chain of TDPBF16PS steps over K, 32 k (16 pairs) a step in increasing k, from a
// zero accumulator, K padded with zeros to a multiple of 32 (zero products). What one step
// computes (its order and rounding inside the instruction, denormals flushed) is the hardware's
// and the same for every element of every tile, so results do not depend on M, N, the core split
// or which tiles advance together: a prompt's rows give the bits of the same rows decoded alone.
// They differ from avx512_bf16's (one accumulator per element instead of 16 lanes and a tree).
//
// Layout: an A tile is 16 rows of w (16 outputs) by 32 k, loaded straight from the PyTorch layout
// (stride sw), so the weights need no packing; a B tile is 16 k-pairs by 16 rows of x, x packed
// per call into the pairs layout TDPBF16PS reads (rows padded with zeros to a multiple of 16); a C
// tile holds 16 outputs by 16 rows in f32 and is written to y transposed. The eight tiles: C 0-3,
// A 4-5, B 6-7. Per group of up to 64 x rows (1 to 4 blocks of 16), the C tiles cover one block
// of outputs by every block of rows, except for two blocks of rows, which take two blocks of
// outputs at once. Measured on one core (sk_bench_matmul_cpu_time bf16, N = K = 4096, µs): M = 1
// 1192 / 1230 / 1243 with 1 / 2 / 4 blocks of outputs side by side (each block is 16 weight rows
// streamed at once, and more streams than the prefetchers follow cost more than the TDPBF16PS
// chains they overlap), M = 16 1270 / 1295 / 1304; M = 32 1453 with 2 and 1746 with 1.
#include "kernels/matmul_bf16_amx.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/masked_io.h"
#include "kernels/simd.h"

#if SK_KERNELS_X86
#include <immintrin.h>

#define SK_TARGET_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))

namespace sk::kernels {
namespace {

constexpr int64_t kTile = 16;   // rows of every tile; outputs and x rows per C tile
constexpr int64_t kStepK = 32;  // bf16 k per A tile row (64 bytes)
constexpr int64_t kGroupBlocks = 4;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-7 as 16 rows of 64 bytes.
SK_TARGET_AMX void load_tile_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = kTile;
  }
  // The whole struct as the operand: GCC's _tile_loadconfig declares 8 bytes read, which lets
  // the compiler drop the stores of the rest.
  asm volatile("ldtilecfg %0" ::"m"(c));
}

// The tile intrinsics name their tile in the instruction text, so each is spelled out per tile.
template <int T>
SK_TARGET_AMX inline void tile_load(const void* p, int64_t stride_bytes) {
  static_assert(T >= 4 && T <= 7);
  if constexpr (T == 4) _tile_loadd(4, p, stride_bytes);
  if constexpr (T == 5) _tile_loadd(5, p, stride_bytes);
  if constexpr (T == 6) _tile_loadd(6, p, stride_bytes);
  if constexpr (T == 7) _tile_loadd(7, p, stride_bytes);
}

template <int T>
SK_TARGET_AMX inline void tile_zero_c() {
  static_assert(T >= 0 && T <= 3);
  if constexpr (T == 0) _tile_zero(0);
  if constexpr (T == 1) _tile_zero(1);
  if constexpr (T == 2) _tile_zero(2);
  if constexpr (T == 3) _tile_zero(3);
}

template <int T>
SK_TARGET_AMX inline void tile_store_c(float* p) {
  static_assert(T >= 0 && T <= 3);
  if constexpr (T == 0) _tile_stored(0, p, 64);
  if constexpr (T == 1) _tile_stored(1, p, 64);
  if constexpr (T == 2) _tile_stored(2, p, 64);
  if constexpr (T == 3) _tile_stored(3, p, 64);
}

#define SK_AMX_DP(c, a, b) \
  if constexpr (C == c && A == a && B == b) _tile_dpbf16ps(c, a, b)

template <int C, int A, int B>
SK_TARGET_AMX inline void tile_dp() {
  static_assert(C >= 0 && C <= 3 && (A == 4 || A == 5) && (B == 6 || B == 7));
  SK_AMX_DP(0, 4, 6);
  SK_AMX_DP(0, 4, 7);
  SK_AMX_DP(0, 5, 6);
  SK_AMX_DP(0, 5, 7);
  SK_AMX_DP(1, 4, 6);
  SK_AMX_DP(1, 4, 7);
  SK_AMX_DP(1, 5, 6);
  SK_AMX_DP(1, 5, 7);
  SK_AMX_DP(2, 4, 6);
  SK_AMX_DP(2, 4, 7);
  SK_AMX_DP(2, 5, 6);
  SK_AMX_DP(2, 5, 7);
  SK_AMX_DP(3, 4, 6);
  SK_AMX_DP(3, 4, 7);
  SK_AMX_DP(3, 5, 6);
  SK_AMX_DP(3, 5, 7);
}
#undef SK_AMX_DP

template <int... I, class F>
SK_TARGET_AMX inline void for_each_index(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// Where one block of 16 outputs reads its A tiles: rows of w for the whole K steps, and a
// zero-padded copy of the last partial step (nullptr when K is a multiple of 32).
struct OutBlock {
  const uint16_t* w;
  int64_t sw_bytes;
  const uint16_t* k_tail;  // 16 rows of 32, stride 64 bytes
  int64_t n0;              // first output
  int64_t n;               // outputs that are real (up to 16)
};

// NB blocks of outputs by MB blocks of x rows (NB * MB <= 4 C tiles), over `steps` whole K
// steps, then the tail step when the blocks have one. xp: MB packed blocks of x rows, `xp_block`
// uint32 apart, each kTile uint32 (16 rows' pairs) per k-pair.
template <int NB, int MB>
SK_TARGET_AMX void run_group(const OutBlock* ob, const uint32_t* xp, int64_t xp_block, int64_t steps, float* y,
                             int64_t sy, int64_t m0, int64_t m) {
  static_assert(NB * MB <= 4);
  constexpr auto mbs = std::make_integer_sequence<int, MB>();
  for_each_index(std::make_integer_sequence<int, NB * MB>(), [](auto c) SK_TARGET_AMX { tile_zero_c<c>(); });
  const auto step = [&](int64_t s, const uint16_t* const* a, const int64_t* a_stride) SK_TARGET_AMX {
    const uint32_t* xs = xp + s * (kStepK / 2) * kTile;
    if constexpr (MB <= 2) {
      for_each_index(mbs, [&](auto mb) SK_TARGET_AMX { tile_load<6 + mb>(xs + mb * xp_block, 64); });
      for_each_index(std::make_integer_sequence<int, NB>(), [&](auto nb) SK_TARGET_AMX {
        constexpr int kA = 4 + nb % 2;
        tile_load<kA>(a[nb], a_stride[nb]);
        for_each_index(mbs, [&](auto mb) SK_TARGET_AMX { tile_dp<nb * MB + mb, kA, 6 + mb>(); });
      });
    } else {
      static_assert(NB == 1);
      tile_load<4>(a[0], a_stride[0]);
      for_each_index(mbs, [&](auto mb) SK_TARGET_AMX {
        constexpr int kB = 6 + mb % 2;
        tile_load<kB>(xs + mb * xp_block, 64);
        tile_dp<mb, 4, kB>();
      });
    }
  };
  const uint16_t* a[NB];
  int64_t a_stride[NB];
  for (int nb = 0; nb < NB; ++nb) a_stride[nb] = ob[nb].sw_bytes;
  for (int64_t s = 0; s < steps; ++s) {
    for (int nb = 0; nb < NB; ++nb) a[nb] = ob[nb].w + s * kStepK;
    step(s, a, a_stride);
  }
  if (ob[0].k_tail != nullptr) {
    for (int nb = 0; nb < NB; ++nb) {
      a[nb] = ob[nb].k_tail;
      a_stride[nb] = 64;
    }
    step(steps, a, a_stride);
  }
  alignas(64) float c[NB * MB][kTile][kTile];
  for_each_index(std::make_integer_sequence<int, NB * MB>(),
                 [&](auto t) SK_TARGET_AMX { tile_store_c<t>(&c[t][0][0]); });
  // The stores above are invisible to the compiler (as the tile loads' reads are).
  asm volatile("" ::: "memory");
  for (int nb = 0; nb < NB; ++nb) {
    for (int mb = 0; mb < MB; ++mb) {
      const int64_t rows = std::min<int64_t>(kTile, m - mb * kTile);
      for (int64_t r = 0; r < rows; ++r) {
        float* out = y + (m0 + mb * kTile + r) * sy + ob[nb].n0;
        for (int64_t i = 0; i < ob[nb].n; ++i) out[i] = c[nb * MB + mb][i][r];
      }
    }
  }
}

template <int NB, int MB>
SK_TARGET_AMX void run_blocks(const OutBlock* ob, int64_t count, const uint32_t* xp, int64_t xp_block, int64_t steps,
                              float* y, int64_t sy, int64_t m0, int64_t m) {
  int64_t b = 0;
  for (; b + NB <= count; b += NB) run_group<NB, MB>(ob + b, xp, xp_block, steps, y, sy, m0, m);
  for (; b < count; ++b) run_group<1, MB>(ob + b, xp, xp_block, steps, y, sy, m0, m);
}

// x rows [0, m) (m <= 64) as bf16 pairs: block mb holds rows 16 mb .. 16 mb + 15, pair p of row r
// at [mb * xp_block + p * 16 + r % 16]; rows past m and k past K are zero.
SK_TARGET_AMX void pack_x(const float* x, int64_t sx, int64_t m, int64_t k, int64_t pairs, uint32_t* xp,
                          int64_t xp_block) {
  const int64_t blocks = (m + kTile - 1) / kTile;
  std::memset(xp, 0, sizeof(uint32_t) * static_cast<size_t>(blocks * xp_block));
  const __m512i lanes = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int>(kTile)));
  for (int64_t r = 0; r < m; ++r) {
    const float* row = x + r * sx;
    uint32_t* dst = xp + (r / kTile) * xp_block + r % kTile;
    for (int64_t k0 = 0; k0 < pairs * 2; k0 += kStepK) {
      const int64_t lo_n = std::clamp<int64_t>(k - k0, 0, 16);
      const int64_t hi_n = std::clamp<int64_t>(k - k0 - 16, 0, 16);
      const __m512 lo = simd::masked_load_ps(simd::mask16(lo_n), row + std::min(k0, k));
      const __m512 hi = simd::masked_load_ps(simd::mask16(hi_n), row + std::min(k0 + 16, k));
      // Pair p = (k0 + 2p, k0 + 2p + 1): the even element in the low half, as TDPBF16PS reads.
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
      _mm512_i32scatter_epi32(dst + (k0 / 2) * kTile, lanes, both, 4);
    }
  }
  asm volatile("" ::: "memory");
}

}  // namespace

SK_TARGET_AMX void gemm_bf16_amx(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy,
                                 int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0) return;
  const int64_t steps = k / kStepK;
  const int64_t pairs = (k + kStepK - 1) / kStepK * (kStepK / 2);
  const int64_t xp_block = pairs * kTile;
  // Per worker thread, grown to the largest call: x packed per group of 64 rows, and the last
  // partial block of outputs copied with zero rows and zero k up to a whole tile.
  thread_local std::vector<uint32_t> xp;
  thread_local std::vector<uint16_t> n_tail;
  thread_local std::vector<uint16_t> tails;
  thread_local std::vector<OutBlock> blocks;
  xp.resize(static_cast<size_t>(kGroupBlocks * xp_block));
  const int64_t full = n / kTile;
  const int64_t rest = n % kTile;
  blocks.resize(static_cast<size_t>(full + (rest > 0 ? 1 : 0)));
  const int64_t k_main = steps * kStepK;
  const bool has_k_tail = k_main < k;
  for (int64_t b = 0; b < full; ++b) {
    blocks[b] = {w + b * kTile * sw, sw * 2, nullptr, b * kTile, kTile};
  }
  if (has_k_tail) {
    tails.assign(static_cast<size_t>(full * kTile * kStepK), 0);
    for (int64_t b = 0; b < full; ++b) {
      uint16_t* t = tails.data() + b * kTile * kStepK;
      for (int64_t r = 0; r < kTile; ++r) {
        std::memcpy(t + r * kStepK, w + (b * kTile + r) * sw + k_main, sizeof(uint16_t) * (k - k_main));
      }
      blocks[b].k_tail = t;
    }
  }
  if (rest > 0) {
    const int64_t ld = pairs * 2;
    n_tail.assign(static_cast<size_t>(kTile * ld), 0);
    for (int64_t r = 0; r < rest; ++r)
      std::memcpy(n_tail.data() + r * ld, w + (full * kTile + r) * sw, sizeof(uint16_t) * k);
    blocks[full] = {n_tail.data(), ld * 2, nullptr, full * kTile, rest};
  }
  load_tile_config();
  for (int64_t m0 = 0; m0 < m; m0 += kGroupBlocks * kTile) {
    const int64_t mg = std::min(kGroupBlocks * kTile, m - m0);
    pack_x(x + m0 * sx, sx, mg, k, pairs, xp.data(), xp_block);
    const int64_t mbs = (mg + kTile - 1) / kTile;
    const auto run = [&](const OutBlock* ob, int64_t count, int64_t st) SK_TARGET_AMX {
      switch (mbs) {
        case 1:
          run_blocks<1, 1>(ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
        case 2:
          run_blocks<2, 2>(ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
        case 3:
          run_blocks<1, 3>(ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
        default:
          run_blocks<1, 4>(ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
      }
    };
    run(blocks.data(), full, steps);
    // The partial block of outputs is padded in k as well: whole steps only.
    if (rest > 0) run(blocks.data() + full, 1, pairs * 2 / kStepK);
  }
  _tile_release();
}

}  // namespace sk::kernels

#else

namespace sk::kernels {

void gemm_bf16_amx(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t) {
  __builtin_trap();  // never selected off x86
}

}  // namespace sk::kernels

#endif
