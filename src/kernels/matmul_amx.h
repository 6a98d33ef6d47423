// The AMX matmul driver (level amx): C = w · xᵀ on tiles, for a weight format that supplies the
// dot-product instruction, the packing of the left operand and the finish of each output.
//
//   struct MyFormat {
//     using W = uint16_t;                      // weight element (bf16 here)
//     static constexpr bool kInt8 = false;     // TDPBSSD on int8, or TDPBF16PS on bf16
//     // Rows [m0, m0 + rows) of x as 32-bit groups (2 bf16 or 4 int8 along k): group g of row r at
//     // xp[(r / 16) * xp_block + g * 16 + r % 16], with zeros past K up to a whole 64-byte step
//     // (the places of the rows past `rows` are left as they are: their outputs are not read).
//     void pack(int64_t m0, int64_t rows, int64_t k, uint32_t* xp, int64_t xp_block) const;
//     // y_row[i] for i < count: output n0 + i of row m (row_in_group of the packed group) from
//     // its accumulator c[i * 16] (f32 bits, or int32).
//     void finish(const uint32_t* c, int64_t row_in_group, int64_t m, int64_t n0, int64_t count,
//                 float* y_row) const;
//   };
//   amx::gemm(MyFormat{...}, w, sw, y, sy, M, N, K);  // y[m * sy + n], w rows of stride sw
//
// Each output is one accumulator advanced by one instruction per 64 bytes of its weight row, in
// increasing k from zero, K padded with zeros: results do not depend on M, N, the core split or
// which tiles advance together. An A tile is 16 weight rows of 64 bytes read in place (stride
// sw), a B tile 16 groups by 16 rows of x, a C tile 16 outputs by 16 rows (written transposed).
// Tiles: C 0-3, A 4-5, B 6-7. Per group of up to 64 x rows (1 to 4 blocks of 16), the C tiles
// cover one block of outputs by every block of rows, except for two blocks of rows, which take two
// blocks of outputs at once. Measured on one core (sk_bench_matmul_cpu_time bf16, N = K = 4096,
// µs): M = 1 1192 / 1230 / 1243 with 1 / 2 / 4 blocks of outputs side by side (each block streams
// 16 weight rows at once, and more streams than the prefetchers follow cost more than the
// instruction chains they overlap), M = 16 1270 / 1295 / 1304; M = 32 1453 with 2 and 1746 with 1.
// Tiles are double-buffered where the shape leaves them free: the A tile (one block of outputs)
// and the B tile (one block of rows) alternate between steps, and groups of at most two C tiles
// alternate between tiles 0-1 and 2-3, since a tile is not renamed: a load into it waits until the
// previous instruction reading it is done (LongCat-small bf16 decode at 2 cores, L3-resident
// weights: 420 -> 470 tokens/s).
//
// Callers: matmul_bf16_amx.cc, matmul_w8a8_amx.cc. Only where selected_isa_level() is kIsaAmx
// (cpu_isa.h: the OS granted the process the tile state).
#ifndef SUPERKERNEL_KERNELS_MATMUL_AMX_H_
#define SUPERKERNEL_KERNELS_MATMUL_AMX_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/simd.h"

#if SK_KERNELS_X86
#include <immintrin.h>

#define SK_TARGET_AMX                                                                         \
  __attribute__((                                                                             \
      target("amx-tile,amx-bf16,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2," \
             "fma")))

namespace sk::kernels::amx {

inline constexpr int64_t kTile = 16;      // rows of every tile; outputs and x rows per C tile
inline constexpr int64_t kRowBytes = 64;  // bytes of every tile row
inline constexpr int64_t kGroupBlocks = 4;
inline constexpr int64_t kPrefetchRowsBytes = 2048;  // OutBlock::next

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-7 as 16 rows of 64 bytes.
SK_TARGET_AMX inline void load_tile_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = kRowBytes;
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
SK_TARGET_AMX inline void tile_store_c(uint32_t* p) {
  static_assert(T >= 0 && T <= 3);
  if constexpr (T == 0) _tile_stored(0, p, kRowBytes);
  if constexpr (T == 1) _tile_stored(1, p, kRowBytes);
  if constexpr (T == 2) _tile_stored(2, p, kRowBytes);
  if constexpr (T == 3) _tile_stored(3, p, kRowBytes);
}

// C += A · B: TDPBSSD (int8 by int8 into int32) or TDPBF16PS (bf16 pairs into f32).
#define SK_AMX_DP(c, a, b)                    \
  if constexpr (C == c && A == a && B == b) { \
    if constexpr (kInt8) {                    \
      _tile_dpbssd(c, a, b);                  \
    } else {                                  \
      _tile_dpbf16ps(c, a, b);                \
    }                                         \
  }

template <int C, int A, int B, bool kInt8>
SK_TARGET_AMX inline void tile_dp() {
  static_assert(C >= 0 && C <= 3 && (A == 4 || A == 5) && (B == 6 || B == 7));
  SK_AMX_DP(0, 4, 6)
  SK_AMX_DP(0, 4, 7)
  SK_AMX_DP(0, 5, 6)
  SK_AMX_DP(0, 5, 7)
  SK_AMX_DP(1, 4, 6)
  SK_AMX_DP(1, 4, 7)
  SK_AMX_DP(1, 5, 6)
  SK_AMX_DP(1, 5, 7)
  SK_AMX_DP(2, 4, 6)
  SK_AMX_DP(2, 4, 7)
  SK_AMX_DP(2, 5, 6)
  SK_AMX_DP(2, 5, 7)
  SK_AMX_DP(3, 4, 6)
  SK_AMX_DP(3, 4, 7)
  SK_AMX_DP(3, 5, 6)
  SK_AMX_DP(3, 5, 7)
}
#undef SK_AMX_DP

template <int... I, class F>
SK_TARGET_AMX inline void for_each_index(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// Where one block of 16 outputs reads its A tiles: rows of w for the whole 64-byte steps, and a
// zero-padded copy of the last partial step (nullptr when the row has none).
struct OutBlock {
  const uint8_t* w;
  int64_t sw_bytes;
  const uint8_t* k_tail;  // 16 rows of 64 bytes
  int64_t n0;             // first output
  int64_t n;              // outputs that are real (up to 16)
  // On short rows, the w rows of the next block, brought into L2 a step at a time: the tile loads
  // read 16 rows side by side, which the prefetchers follow badly on short rows (LongCat-small
  // bf16 decode, rows of 1-2 KiB, in L3: 2 cores 463-475 -> 480-485 tokens/s); on long rows the
  // same prefetch cost 5% (one core, N = K = 4096).
  const uint8_t* next = nullptr;
};

// NB blocks of outputs by MB blocks of x rows (NB * MB <= 4 C tiles), over `steps` whole steps,
// then the tail step when the blocks have one. xp: MB packed blocks of x rows, xp_block uint32
// apart, 16 uint32 (one group of each row) per group along k.
template <int NB, int MB, int CB, class Format>
SK_TARGET_AMX void run_group(const Format& f, const OutBlock* ob, const uint32_t* xp, int64_t xp_block, int64_t steps,
                             float* y, int64_t sy, int64_t m0, int64_t m) {
  static_assert(CB + NB * MB <= 4);
  constexpr bool kInt8 = Format::kInt8;
  constexpr auto mbs = std::make_integer_sequence<int, MB>();
  for_each_index(std::make_integer_sequence<int, NB * MB>(), [](auto c) SK_TARGET_AMX { tile_zero_c<CB + c>(); });
  // Step parity q picks the A tile when one A tile serves the step (NB = 1) and the B tile when
  // one B tile does (MB = 1), so that the next step's loads need not wait for this step's
  // instructions to finish reading their tiles.
  const auto step = [&](int64_t s, auto q, const uint8_t* const* a, const int64_t* a_stride) SK_TARGET_AMX {
    const uint32_t* xs = xp + s * kTile * kTile;
    if constexpr (MB <= 2) {
      constexpr int kB0 = MB == 1 ? 6 + q : 6;
      for_each_index(mbs, [&](auto mb) SK_TARGET_AMX { tile_load<kB0 + mb>(xs + mb * xp_block, kRowBytes); });
      for_each_index(std::make_integer_sequence<int, NB>(), [&](auto nb) SK_TARGET_AMX {
        constexpr int kA = NB == 1 ? 4 + q : 4 + nb % 2;
        tile_load<kA>(a[nb], a_stride[nb]);
        for_each_index(mbs, [&](auto mb) SK_TARGET_AMX { tile_dp<CB + nb * MB + mb, kA, kB0 + mb, kInt8>(); });
      });
    } else {
      static_assert(NB == 1);
      constexpr int kA = 4 + q;
      tile_load<kA>(a[0], a_stride[0]);
      for_each_index(mbs, [&](auto mb) SK_TARGET_AMX {
        constexpr int kB = 6 + mb % 2;
        tile_load<kB>(xs + mb * xp_block, kRowBytes);
        tile_dp<CB + mb, kA, kB, kInt8>();
      });
    }
  };
  const uint8_t* a[NB];
  int64_t a_stride[NB];
  for (int nb = 0; nb < NB; ++nb) a_stride[nb] = ob[nb].sw_bytes;
  const auto whole_step = [&](int64_t s, auto q) SK_TARGET_AMX {
    for (int nb = 0; nb < NB; ++nb) {
      a[nb] = ob[nb].w + s * kRowBytes;
      if (ob[nb].next == nullptr) continue;
      const char* p = reinterpret_cast<const char*>(ob[nb].next + s * kRowBytes);
      for (int r = 0; r < kTile; ++r) _mm_prefetch(p + r * a_stride[nb], _MM_HINT_T1);
    }
    step(s, q, a, a_stride);
  };
  int64_t s = 0;
  for (; s + 2 <= steps; s += 2) {
    whole_step(s, std::integral_constant<int, 0>{});
    whole_step(s + 1, std::integral_constant<int, 1>{});
  }
  if (s < steps) whole_step(s, std::integral_constant<int, 0>{});
  if (ob[0].k_tail != nullptr) {
    for (int nb = 0; nb < NB; ++nb) {
      a[nb] = ob[nb].k_tail;
      a_stride[nb] = kRowBytes;
    }
    step(steps, std::integral_constant<int, 1>{}, a, a_stride);
  }
  alignas(64) uint32_t c[NB * MB][kTile][kTile];
  for_each_index(std::make_integer_sequence<int, NB * MB>(),
                 [&](auto t) SK_TARGET_AMX { tile_store_c<CB + t>(&c[t][0][0]); });
  // The stores above are invisible to the compiler (as the tile loads' reads are).
  asm volatile("" ::: "memory");
  for (int nb = 0; nb < NB; ++nb) {
    for (int mb = 0; mb < MB; ++mb) {
      const int64_t rows = std::min<int64_t>(kTile, m - mb * kTile);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row = mb * kTile + r;
        f.finish(&c[nb * MB + mb][0][r], row, m0 + row, ob[nb].n0, ob[nb].n, y + (m0 + row) * sy + ob[nb].n0);
      }
    }
  }
}

// Groups of NB blocks of outputs. Groups of at most two C tiles alternate between tiles 0-1 and
// 2-3, so that a group's instructions need not wait for the previous group's C tiles to be stored.
template <int NB, int MB, class Format>
SK_TARGET_AMX void run_blocks(const Format& f, const OutBlock* ob, int64_t count, const uint32_t* xp, int64_t xp_block,
                              int64_t steps, float* y, int64_t sy, int64_t m0, int64_t m) {
  int64_t b = 0;
  if constexpr (NB * MB <= 2) {
    for (; b + 2 * NB <= count; b += 2 * NB) {
      run_group<NB, MB, 0>(f, ob + b, xp, xp_block, steps, y, sy, m0, m);
      run_group<NB, MB, 2>(f, ob + b + NB, xp, xp_block, steps, y, sy, m0, m);
    }
  }
  for (; b + NB <= count; b += NB) run_group<NB, MB, 0>(f, ob + b, xp, xp_block, steps, y, sy, m0, m);
  for (; b < count; ++b) run_group<1, MB, 0>(f, ob + b, xp, xp_block, steps, y, sy, m0, m);
}

template <class Format>
SK_TARGET_AMX void gemm(const Format& f, const typename Format::W* w, int64_t sw, float* y, int64_t sy, int64_t m,
                        int64_t n, int64_t k) {
  using W = typename Format::W;
  constexpr int64_t kStepK = kRowBytes / static_cast<int64_t>(sizeof(W));
  if (m <= 0 || n <= 0) return;
  const int64_t steps = k / kStepK;
  const int64_t k_pad = (k + kStepK - 1) / kStepK * kStepK;
  const int64_t xp_block = k_pad * static_cast<int64_t>(sizeof(W)) / 4 * kTile;
  // Per worker thread, grown to the largest call: x packed per group of 64 rows, the last partial
  // step of every block of outputs copied with zeros, and the last partial block of outputs copied
  // with zero rows and zeros up to a whole step.
  thread_local std::vector<uint32_t> xp;
  thread_local std::vector<uint8_t> k_tails;
  thread_local std::vector<uint8_t> n_tail;
  thread_local std::vector<OutBlock> blocks;
  xp.resize(static_cast<size_t>(kGroupBlocks * xp_block));
  const int64_t full = n / kTile;
  const int64_t rest = n % kTile;
  const int64_t row_bytes = k * static_cast<int64_t>(sizeof(W));
  const int64_t main_bytes = steps * kRowBytes;
  const auto* wb = reinterpret_cast<const uint8_t*>(w);
  const int64_t sw_bytes = sw * static_cast<int64_t>(sizeof(W));
  blocks.resize(static_cast<size_t>(full + (rest > 0 ? 1 : 0)));
  for (int64_t b = 0; b < full; ++b) blocks[b] = {wb + b * kTile * sw_bytes, sw_bytes, nullptr, b * kTile, kTile};
  if (row_bytes <= kPrefetchRowsBytes) {
    for (int64_t b = 0; b + 1 < full; ++b) blocks[b].next = blocks[b + 1].w;
  }
  // Each copied row is written whole, its k padding with zeros; the rows of a partial block past
  // `rest` keep whatever they held (their outputs are never read), so nothing is cleared twice.
  const auto copy_row = [](uint8_t* dst, const uint8_t* src, int64_t bytes, int64_t padded) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    std::memset(dst + bytes, 0, static_cast<size_t>(padded - bytes));
  };
  if (main_bytes < row_bytes) {
    k_tails.resize(static_cast<size_t>(full * kTile * kRowBytes));
    for (int64_t b = 0; b < full; ++b) {
      uint8_t* t = k_tails.data() + b * kTile * kRowBytes;
      for (int64_t r = 0; r < kTile; ++r) {
        copy_row(t + r * kRowBytes, wb + (b * kTile + r) * sw_bytes + main_bytes, row_bytes - main_bytes, kRowBytes);
      }
      blocks[b].k_tail = t;
    }
  }
  if (rest > 0) {
    const int64_t ld = k_pad * static_cast<int64_t>(sizeof(W));
    n_tail.resize(static_cast<size_t>(kTile * ld));
    for (int64_t r = 0; r < rest; ++r)
      copy_row(n_tail.data() + r * ld, wb + (full * kTile + r) * sw_bytes, row_bytes, ld);
    blocks[full] = {n_tail.data(), ld, nullptr, full * kTile, rest};
  }
  load_tile_config();
  for (int64_t m0 = 0; m0 < m; m0 += kGroupBlocks * kTile) {
    const int64_t mg = std::min(kGroupBlocks * kTile, m - m0);
    const int64_t mbs = (mg + kTile - 1) / kTile;
    // Rows past mg are not cleared: their columns of the C tiles are never read.
    f.pack(m0, mg, k, xp.data(), xp_block);
    // The packing's stores are read by tile loads, which the compiler does not see.
    asm volatile("" ::: "memory");
    const auto run = [&](const OutBlock* ob, int64_t count, int64_t st) SK_TARGET_AMX {
      switch (mbs) {
        case 1:
          run_blocks<1, 1>(f, ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
        case 2:
          run_blocks<2, 2>(f, ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
        case 3:
          run_blocks<1, 3>(f, ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
        default:
          run_blocks<1, 4>(f, ob, count, xp.data(), xp_block, st, y, sy, m0, mg);
          break;
      }
    };
    run(blocks.data(), full, steps);
    // The partial block of outputs is padded along k as well: whole steps only.
    if (rest > 0) run(blocks.data() + full, 1, k_pad / kStepK);
  }
  _tile_release();
}

// Where row r of a packed group starts (the layout pack() writes, above): its group g is at
// [g * kTile] from there.
inline uint32_t* packed_row(uint32_t* xp, int64_t xp_block, int64_t r) {
  return xp + (r / kTile) * xp_block + r % kTile;
}

// Scatters 16 uint32 groups (one 64-byte step of one x row) to their places in the packed
// layout: group g to dst[g * 16].
SK_TARGET_AMX inline void scatter_groups(uint32_t* dst, __m512i groups) {
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(kTile)));
  _mm512_i32scatter_epi32(dst, at, groups, 4);
}

}  // namespace sk::kernels::amx

#endif  // SK_KERNELS_X86

#endif  // SUPERKERNEL_KERNELS_MATMUL_AMX_H_
