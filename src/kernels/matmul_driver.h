// The one GEMM driver of the matmul family: y[m][n] = x[m, :] · w[n, :] for every weight type.
// Each type supplies its per-ISA inner tiles and how activations are packed and results
// finished, beside its kernels: matmul.cc (f32 weights), matmul_bf16.cc (bf16 weights),
// matmul_w8a8.cc (int8 weights and activations).
//
// Usage (a weight type's file):
//
//   struct F32Rows {                       // the "Op" concept
//     using A = float;                     // packed activation element
//     using W = float;                     // weight element
//     using S = float;                     // accumulator lane
//     const Tiles<A, W, S>& tiles;
//     void pack(int64_t m0, int64_t mb, int64_t k0, int64_t kn, A* panel, int64_t ld, float* rs) const;
//     void finish(const S* st, int64_t ld, const float* rs, int64_t n0, int64_t mb, int64_t nb,
//                 float* y, int64_t sy) const;
//   };
//   gemm::run(F32Rows{...}, w, sw, y, sy, M, N, K);
//
// Loop order: x is packed once per block of up to kMBlock rows (the whole of K when a row fits
// the panel, which holds for every K the int8 kernels accept and for f32 K <= 8192), then every
// block of kNBlock weight rows accumulates its (rows x kNBlock) dot products in register tiles
// over K. A block of more than mr rows steps through K in Tiles::kc (on AVX-512 a 16-row slice
// of x of about 256 KiB, which stays in L2, so each weight row is one long stream), so that the
// weight tile, read once from memory, is reused from cache by every tile of rows. With at most
// one tile of rows K is not blocked, so a single pass streams every weight row once, as GEMV
// must.
//
// Determinism: every accumulator lane of one dot product sees the same operations in the same
// order whatever the tile, block, M, N or core split: the tiles only choose which dot products
// advance together, and K blocks are multiples of every lane pattern (kc and the panel padding
// are multiples of 64 elements). So a result depends on (x row, w row, K, ISA level) only.
#ifndef SUPERKERNEL_KERNELS_MATMUL_DRIVER_H_
#define SUPERKERNEL_KERNELS_MATMUL_DRIVER_H_

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/simd.h"

namespace sk::kernels::gemm {

// Rows of x per packed block, at most: every block streams the weights once, so batched decode and
// short prefill chunks (M <= 64 with int8 or bf16 rows of K = 4096, M <= 32 with f32 ones) read
// them once per call.
inline constexpr int64_t kMBlock = 64;
inline constexpr int64_t kNBlock = 32;  // rows of w whose sums one pass keeps
inline constexpr int kMaxLanes = 16;    // accumulator lanes per dot product, at most
// Packed activations live on the stack: 16 f32 rows of K = 8192 with their padding (so that M = 16
// streams the weights once), or 8 int8 rows of K = 65536.
inline constexpr int64_t kDecodeRows = 16;
inline constexpr int64_t kPanelBytes = kDecodeRows * (8192 + 64) * 4;

// GEMV tiles over short rows (at most kShortRowBytes of weights: K up to 512 in f32, 1024 in
// bf16 / f16, 2048 in int8) touch the next tile's line at the offset they read now, once per line.
// Such rows end before the hardware prefetcher has ramped up on the tile's streams, so without
// this each tile started on cold misses (w4a8 on a Llama layer's 512-byte rows: the decode
// step's matmuls 1.8x faster with it); on 4 KiB rows the same prefetch cost 10-30%.
inline constexpr int64_t kShortRowBytes = 2048;

// Accumulates the (mr x nr) dot products of panel rows [0, mr) (stride sx) and w rows [0, nr)
// (stride sw) over k in [0, kn) into their lanes at st[(m * ld + j) * lanes].
template <class A, class W, class S>
using TileFn = void (*)(const A* x, int64_t sx, const W* w, int64_t sw, S* st, int64_t ld, int64_t kn);

template <class A, class W, class S>
struct Tiles {
  int lanes;    // accumulator lanes per dot product
  int gemv_nr;  // 1 x gemv_nr tiles when M == 1
  int mr;       // mr x nr tiles otherwise
  int nr;
  int64_t kc;  // K step of a block with more than mr rows (a multiple of 64)
  int few_mr;  // few_mr x few_nr tiles when 1 < M < mr (a single pass over K)
  int few_nr;
  // Supports mr x [1, nr], few_mr x [1, few_nr] and 1 x [1, max(nr, gemv_nr, few_nr)]: a tile
  // narrower than nr_tile takes the last rows of a block.
  TileFn<A, W, S> (*tile)(int mr, int nr);
};

// tile_table<MR>(nr, seq): the instantiation Tile<MR, nr> for nr in [1, N], from a table of
// instantiations made by `make` (a lambda template returning Tile<MR, NR>).
template <class Fn, int MR, int... I, class Make>
Fn tile_of(int nr, std::integer_sequence<int, I...>, Make make) {
  static constexpr Fn table[] = {make.template operator()<MR, I + 1>()...};
  return table[std::clamp(nr, 1, static_cast<int>(sizeof...(I))) - 1];
}

// Panel row stride for K: a multiple of 64 elements (every tile's K step divides it, and the
// padding is zero, so vector loads past K read zeros), plus one cache line when the row would be
// a multiple of 4 KiB, so that the rows of a block do not all fall into the same L1 sets.
template <class A>
constexpr int64_t panel_stride(int64_t k) {
  int64_t ld = (k + 63) / 64 * 64;
  if ((ld * static_cast<int64_t>(sizeof(A))) % 4096 == 0) ld += 64 / static_cast<int64_t>(sizeof(A));
  return ld;
}

static_assert(kPanelBytes / static_cast<int64_t>(sizeof(float)) / panel_stride<float>(8192) >= kDecodeRows,
              "decode with K = 8192 must stream the weights once");

// y[m * sy + n] for m < M, n < N from w rows (stride sw) and the activation rows `op` packs.
template <class Op>
void run(const Op& op, const typename Op::W* w, int64_t sw, float* y, int64_t sy, int64_t M, int64_t N, int64_t K) {
  using A = typename Op::A;
  using S = typename Op::S;
  const auto& t = op.tiles;
  constexpr int64_t kCap = kPanelBytes / static_cast<int64_t>(sizeof(A));
  alignas(64) A panel[kCap];
  alignas(64) S state[kMBlock * kNBlock * kMaxLanes];
  float rs[kMBlock];
  // A whole row fits the panel for any realistic K; beyond, the rows are packed per K step.
  const bool whole_rows = panel_stride<A>(K) <= kCap;
  const bool block_k = M > t.mr || !whole_rows;
  const int64_t kc = block_k ? t.kc : K;
  const int64_t ld = whole_rows ? panel_stride<A>(K) : panel_stride<A>(t.kc);
  const int64_t rows = std::clamp<int64_t>(kCap / ld, 1, kMBlock);
  const bool few = M > 1 && M < t.mr;
  const int nr_tile = M == 1 ? t.gemv_nr : few ? t.few_nr : t.nr;
  const int mr_tile = few ? t.few_mr : t.mr;
  for (int64_t m0 = 0; m0 < M; m0 += rows) {
    const int64_t mb = std::min(rows, M - m0);
    if (whole_rows) op.pack(m0, mb, 0, K, panel, ld, rs);
    for (int64_t n0 = 0; n0 < N; n0 += kNBlock) {
      const int64_t nb = std::min(kNBlock, N - n0);
      std::fill(state, state + mb * kNBlock * t.lanes, S{});
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t kn = std::min(kc, K - k0);
        // Whole rows are packed once per row block and stepped through by k0; otherwise each K
        // step packs its own slice (never forming a pointer past the panel).
        const A* xb = panel;
        if (whole_rows) {
          xb = panel + k0;
        } else {
          op.pack(m0, mb, k0, kn, panel, ld, rs);
        }
        for (int64_t n = 0; n < nb;) {
          const int nr = static_cast<int>(std::min<int64_t>(nr_tile, nb - n));
          for (int64_t m = 0; m < mb;) {
            const int mr = mb - m >= mr_tile ? mr_tile : 1;
            t.tile(mr, nr)(xb + m * ld, ld, w + (n0 + n) * sw + k0, sw, state + (m * kNBlock + n) * t.lanes, kNBlock,
                           kn);
            m += mr;
          }
          n += nr;
        }
      }
      op.finish(state, kNBlock, rs, n0, mb, nb, y + m0 * sy + n0, sy);
    }
  }
}

// The prefetch helpers below are always inlined. A prefetch has no side effect in GCC's model, so
// a helper that is only partly inlined leaves an outlined part that ipa-pure-const finds to be
// const, and the call to it is deleted as dead: the w4a8 tile calling
// prefetch_block_ahead once per step got no prefetch at all (no prefetch instruction in
// its body; decode at the speed of no prefetch).
#define SK_PREFETCH_INLINE [[gnu::always_inline]] inline

// Touches the weights of the tile after next at the k this tile reads now. A multi-row tile reads
// only NR weight rows at a time, too few streams to keep the memory system busy, and this adds
// streams without lengthening the FMA chains (measured: int8 M = 4 / 16 10-20% faster). The
// lines are wanted two tiles later: into L1 when those tiles' 2 * NR rows of the tile's K range
// (kn elements) fit well inside it, into L2 otherwise (one pass over all of K, M <= 4: 15-20%
// faster than filling L1 with lines it evicts before use; f32 at M = 16, 8 KiB ahead: 12% slower
// from L2). GEMV tiles (MR = 1) have their own prefetches below. Prefetches past the slice or the
// tensor never fault.
template <int MR, int NR, class W>
SK_PREFETCH_INLINE void prefetch_later_rows(const W* w_row_k, int64_t sw, int64_t kn) {
  if constexpr (MR > 1) {
    const W* p = w_row_k + 2 * NR * sw;
    if (2 * NR * kn * static_cast<int64_t>(sizeof(W)) < 16384) {
      __builtin_prefetch(p, 0, 3);
    } else {
      __builtin_prefetch(p, 0, 2);
    }
  }
}

template <int MR, int NR, class W>
SK_PREFETCH_INLINE void prefetch_next_tile_short_rows(const W* w_row_k, int64_t sw, int64_t k) {
  if constexpr (MR == 1) {
    const int64_t bytes = static_cast<int64_t>(sizeof(W));
    if (sw * bytes <= kShortRowBytes && k * bytes % 64 == 0) __builtin_prefetch(w_row_k + NR * sw, 0, 3);
  }
}

// The AVX-512 GEMV tiles (f16 / bf16 widened, bf16, int8, row-major w4a8; f32 with its own
// distance, matmul.cc): each K step of kStep elements brings into L2 the same share of the block
// of the first whole tile at least kAhead bytes ahead (its NR rows, one contiguous block when the
// stride is the row length), in address order. Measured on Zen 4, a Llama decode step on 1
// thread, against the AVX2 form above (the next tile's line of each row, into L1) or none: w4a8
// on 512-byte rows about 1.2x faster, f16 on 2 KiB rows about 1.35x, bf16 1.15x, int8 1.06x
// (then the next tile, and short rows only). The distance, alternated rounds, tokens/s, small
// model (8 layers, hidden 1024) 1 thread: the next tile (8-16 KiB ahead) bf16 61-69, f16 60-65,
// int8 82-95; 32 KiB 64-71, 73-78, 102-119; 64 KiB 69-72, 69-75, 108-115 (2 threads: within the
// noise). Rows longer than 2 KiB as well (medium model, hidden 2048, 4-11 KiB rows), 1 thread:
// bf16 11.5-12.9 -> 12.1-15.6, f16 9.4-11.5 -> 11.0-11.6, int8 (2-5.5 KiB rows) unchanged, the
// small model unchanged; 2 threads within the noise.
inline constexpr int64_t kGemvAheadBytes = 32768;

// Brings the `bytes` (a multiple of 64) from p on into L2.
SK_PREFETCH_INLINE void prefetch_l2(const void* p, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(static_cast<const char*>(p) + i, 0, 2);
}

template <int MR, int NR, int kStep, int64_t kAhead = kGemvAheadBytes, class W>
SK_PREFETCH_INLINE void prefetch_block_ahead(const W* w_tile, int64_t sw, int64_t k) {
  if constexpr (MR == 1) {
    constexpr int64_t kBytes = static_cast<int64_t>(sizeof(W));
    const int64_t tile_bytes = NR * sw * kBytes;
    const int64_t ahead = std::max<int64_t>(1, kAhead / tile_bytes) * tile_bytes;
    prefetch_l2(reinterpret_cast<const char*>(w_tile) + ahead + k * kBytes * NR, NR * kStep * kBytes);
  }
}

// GEMV tiles that read their NR rows one after another instead of side by side (the form of the
// f16 tiles, the int8 ones on short rows and the bf16 one on short rows at avx512_bf16;
// docs/kernels_matmul.md): each row is one stream of 64-byte steps of kStep elements, each step's
// line brought into L2 kGemvAheadBytes ahead, and step(a, row + k, k) advances the row's
// accumulator a (acc[j], taken by reference: a vector return would cross the ISA boundary of this
// untargeted helper) for the whole steps of kn, in increasing k. The step is a lambda with the
// tile's target attribute. Each row's operations keep their order, so a tile gives the bits
// of the same steps side by side. Returns the K covered; the tile finishes the rest.
template <int NR, int kStep, class W, class V, class Step>
SK_PREFETCH_INLINE int64_t gemv_rows_one_at_a_time(const W* w, int64_t sw, int64_t kn, V* acc, Step step) {
  static_assert(kStep * sizeof(W) == 64, "one step is one 64-byte line of a row");
  const int64_t end = kn / kStep * kStep;
  for (int j = 0; j < NR; ++j) {
    const W* row = w + j * sw;
    V a = acc[j];
    for (int64_t k = 0; k < end; k += kStep) {
      prefetch_l2(reinterpret_cast<const char*>(row + k) + kGemvAheadBytes, 64);
      step(a, row + k, k);
    }
    acc[j] = a;
  }
  return end;
}

// GEMV tiles: touches the first lines of the next tile's NR rows, so their streams do not start on
// cold misses when this tile ends.
template <int MR, int NR, class W>
SK_PREFETCH_INLINE void prefetch_next_tile_start(const W* w, int64_t sw) {
  if constexpr (MR == 1) {
    for (int j = 0; j < NR; ++j) {
      for (int b = 0; b < 256; b += 64) __builtin_prefetch(reinterpret_cast<const char*>(w + (NR + j) * sw) + b, 0, 3);
    }
  }
}

// Shared pack and finish steps of the types whose tiles read f32 activations and keep f32 lanes.

// Copies x rows [m0, m0 + mb), columns [k0, k0 + kn), into the panel, zero-padded to ld.
inline void pack_f32_rows(const float* x, int64_t sx, int64_t m0, int64_t mb, int64_t k0, int64_t kn, float* panel,
                          int64_t ld) {
  for (int64_t m = 0; m < mb; ++m) {
    const float* src = x + (m0 + m) * sx + k0;
    std::copy(src, src + kn, panel + m * ld);
    std::fill(panel + m * ld + kn, panel + (m + 1) * ld, 0.0f);
  }
}

#if SK_KERNELS_X86
// y[0, 16) = the hsum16 trees of the 16 dot products whose lanes are st[0, 256).
SK_TARGET_AVX512 inline void finish_16x16_avx512(const float* st, float* y) {
  _mm512_storeu_ps(y, simd::hsum16x16(st));
}
#endif

// y[m * sy + j] = the fixed-tree sum (simd::hsum_lanes) of the lanes of dot product (m, j). Only
// AVX-512 tiles keep 16 lanes, so with 16 the CPU has AVX-512 and 16 sums are finished at once
// (summed one by one they took 5-9% of a 16-row block's time at K = 4096).
inline void finish_f32_lanes(const float* st, int64_t ld, int lanes, int64_t mb, int64_t nb, float* y, int64_t sy) {
  for (int64_t m = 0; m < mb; ++m) {
    int64_t j = 0;
#if SK_KERNELS_X86
    if (lanes == 16) {
      for (; j + 16 <= nb; j += 16) finish_16x16_avx512(st + (m * ld + j) * 16, y + m * sy + j);
    }
#endif
    for (; j < nb; ++j) y[m * sy + j] = simd::hsum_lanes(st + (m * ld + j) * lanes, lanes);
  }
}

// The driver's Op for f32 activation rows (stride sx) copied to the panel as they are, over
// weights of type Weight (f32, or bf16 words the tiles widen exactly) and tiles that keep f32
// lanes. One adapter for both weight types, so their packing and finishing cannot drift apart.
template <typename Weight, typename Tiles>
struct F32ActivationRows {
  using A = float;
  using W = Weight;
  using S = float;
  const Tiles& tiles;
  const float* x;
  int64_t sx;
  void pack(int64_t m0, int64_t mb, int64_t k0, int64_t kn, float* panel, int64_t ld, float* /*row_scale*/) const {
    pack_f32_rows(x, sx, m0, mb, k0, kn, panel, ld);
  }
  void finish(const float* st, int64_t ld, const float* /*row_scale*/, int64_t /*n0*/, int64_t mb, int64_t nb, float* y,
              int64_t sy) const {
    finish_f32_lanes(st, ld, tiles.lanes, mb, nb, y, sy);
  }
};

}  // namespace sk::kernels::gemm

#endif  // SUPERKERNEL_KERNELS_MATMUL_DRIVER_H_
