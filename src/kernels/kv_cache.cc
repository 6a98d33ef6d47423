// Paged KV-cache appends: kv_append.{f32,bf16} and mla_cache_append.{f32,bf16}.
//
//   kv_append:        k_new, v_new [T, Hkv, Dh] f32, slot_mapping i32 [T],
//                     k_cache, v_cache [num_blocks, block_size, Hkv, Dh] -> k_cache, v_cache
//   mla_cache_append: c_kv [T, R] f32, k_pe [T, P] f32, slot_mapping i32 [T],
//                     latent_cache [num_blocks, block_size, R + P] -> latent_cache
//
// Token t goes to slot s = slot_mapping[t] = block * block_size + offset; s < 0 skips the token.
// The cache suffix of the name is the cache dtype; new values are f32, rounded to bf16 to
// nearest even. The outputs are normally the cache inputs themselves (in place); when an output
// is a different buffer, it receives a copy of the input cache with the tokens written.
//
// Partition: the cache slots, not the tokens, are split across cores. Which slots a token writes
// is data, but which slots a core may write is not: core c owns slots [s0, s1) and writes the
// tokens that land there (scanning slot_mapping in token order, so with repeated slots the last
// token wins on every core count). The access callback can then state exact, disjoint write
// ranges without reading data. The new k/v rows a core reads depend on the data, so it declares
// all of them; they are small next to the cache.
#include <algorithm>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"
#include "util/half.h"

namespace sk::kernels {
namespace {

// Converts n floats to bf16 (round to nearest even, NaN stays a quiet NaN): the same bits as
// sk::f32_to_bf16 on every ISA level.
using ToBf16Fn = void (*)(const float* x, uint16_t* y, int64_t n);

void to_bf16_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 inline __m256i bf16_bits8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(nan));
}

SK_TARGET_AVX2 void to_bf16_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i b = bf16_bits8(_mm256_loadu_ps(x + i));
    // Every value fits 16 bits, so the saturating pack is a plain narrowing; it packs within
    // 128-bit lanes, and the permute gathers the two useful quarters.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(b, b), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

SK_TARGET_AVX512 void to_bf16_avx512(const float* x, uint16_t* y, int64_t n) {
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i half_ulp = _mm512_set1_epi32(0x7fff);
  const __m512i quiet_bit = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = simd::mask16(std::min<int64_t>(16, n - i));
    const __m512 v = simd::masked_load_ps(m, x + i);
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, half_ulp)), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet_bit);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    _mm512_mask_cvtepi32_storeu_epi16(y + i, m, _mm512_mask_mov_epi32(rounded, nan, quiet));
  }
}
#endif

ToBf16Fn select_to_bf16() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return to_bf16_avx512;
    case kIsaAvx2:
      return to_bf16_avx2;
    default:
      break;
  }
#endif
  return to_bf16_scalar;
}

enum class Kind { kKv, kMla };

struct KernelInfo {
  const char* name;
  Kind kind;
  int32_t cache_dtype;
};

constexpr KernelInfo kKvF32 = {"kv_append.f32", Kind::kKv, SK_DTYPE_F32};
constexpr KernelInfo kKvBf16 = {"kv_append.bf16", Kind::kKv, SK_DTYPE_BF16};
constexpr KernelInfo kMlaF32 = {"mla_cache_append.f32", Kind::kMla, SK_DTYPE_F32};
constexpr KernelInfo kMlaBf16 = {"mla_cache_append.bf16", Kind::kMla, SK_DTYPE_BF16};

constexpr int kMaxCaches = 2;
constexpr int kSources = 2;

// One source of new values: [T, heads, width] f32 rows written to cache `cache` at column
// `col + h * width` of the slot's row.
struct Source {
  int operand = 0;
  const float* data = nullptr;
  int64_t stride_t = 0;
  int64_t stride_h = 0;
  int64_t heads = 0;
  int64_t width = 0;
  int cache = 0;
  int64_t col = 0;
  int64_t lo = 0;  // element offsets spanned by the view (for access ranges)
  int64_t hi = 0;
};

struct Cache {
  int in_operand = 0;
  int out_operand = 0;
  const unsigned char* in = nullptr;
  unsigned char* out = nullptr;
  int64_t row_bytes = 0;  // one slot
};

struct Plan {
  const KernelInfo* info = nullptr;
  int64_t t = 0;
  int64_t slots = 0;
  int64_t elem = 0;  // cache element size
  const int32_t* slot_mapping = nullptr;
  int64_t slot_stride = 0;
  int num_caches = 0;
  Cache caches[kMaxCaches];
  Source sources[kSources];
};

// Element-offset bounds of a strided view (non-empty).
void view_bounds(const sk_tensor_arg& t, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = 0;
  for (int d = 0; d < t.rank; ++d) {
    const int64_t span = (t.shape[d] - 1) * t.stride[d];
    *lo += std::min<int64_t>(0, span);
    *hi += std::max<int64_t>(0, span);
  }
}

// A per-head source is [T, heads, width] (kv_append: heads = Hkv, which may be 0); otherwise it
// is [T, width], one row per token (mla_cache_append).
bool plan_source(const sk_tensor_arg& x, const char* what, int operand, int64_t t, bool per_head, int64_t heads,
                 int64_t width, int cache, int64_t col, Source* s, const char* kernel, ErrorSink err) {
  if (!check_tensor(x, kernel, what, SK_DTYPE_F32, 2, err)) return false;
  char s1[96];
  const bool ok = per_head ? x.rank == 3 && x.shape[0] == t && x.shape[1] == heads && x.shape[2] == width
                           : x.rank == 2 && x.shape[0] == t && x.shape[1] == width;
  if (!ok) {
    if (!per_head) {
      return invalid(err, "%s: %s shape %s is not [T = %lld, %lld]", kernel, what, format_shape(x, s1, sizeof s1),
                     static_cast<long long>(t), static_cast<long long>(width));
    }
    return invalid(err, "%s: %s shape %s is not [T = %lld, Hkv = %lld, Dh = %lld]", kernel, what,
                   format_shape(x, s1, sizeof s1), static_cast<long long>(t), static_cast<long long>(heads),
                   static_cast<long long>(width));
  }
  if (!last_dim_contiguous(x)) return invalid(err, "%s: the last dimension of %s must have stride 1", kernel, what);
  s->operand = operand;
  s->data = static_cast<const float*>(x.data);
  s->stride_t = x.stride[0];
  s->stride_h = per_head ? x.stride[1] : 0;
  s->heads = per_head ? heads : 1;
  s->width = width;
  s->cache = cache;
  s->col = col;
  if (sk_tensor_numel(&x) > 0) view_bounds(x, &s->lo, &s->hi);
  return true;
}

// Input cache `what` and its output `out_what` (output c).
bool plan_cache(const sk_kernel_args* args, const KernelInfo& k, int c, int in_operand, int64_t rank, const char* what,
                const char* out_what, Cache* cache, ErrorSink err) {
  const sk_tensor_arg& in = args->inputs[in_operand];
  const sk_tensor_arg& out = args->outputs[c];
  if (!check_tensor(in, k.name, what, k.cache_dtype, static_cast<int32_t>(rank), err) ||
      !check_tensor(out, k.name, out_what, k.cache_dtype, static_cast<int32_t>(rank), err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  if (in.rank != rank) {
    return invalid(err, "%s: %s shape %s has rank %d, expected %lld", k.name, what, format_shape(in, s1, sizeof s1),
                   in.rank, static_cast<long long>(rank));
  }
  if (!same_shape(in, out)) {
    return invalid(err, "%s: %s (output %d) shape %s differs from %s shape %s", k.name, out_what, c,
                   format_shape(out, s1, sizeof s1), what, format_shape(in, s2, sizeof s2));
  }
  if (!sk_tensor_is_contiguous(&in) || !sk_tensor_is_contiguous(&out)) {
    return invalid(err, "%s: %s and %s (output %d) must be dense row-major", k.name, what, out_what, c);
  }
  const int64_t bytes = sk_tensor_numel(&in) * sk_dtype_size(k.cache_dtype);
  const auto* a = static_cast<const unsigned char*>(in.data);
  const auto* b = static_cast<const unsigned char*>(out.data);
  if (bytes > 0 && a != b && a < b + bytes && b < a + bytes) {
    return invalid(err, "%s: %s (output %d) partially overlaps %s (it must be the same buffer or a separate one)",
                   k.name, out_what, c, what);
  }
  cache->in_operand = in_operand;
  cache->out_operand = args->num_inputs + c;
  cache->in = a;
  cache->out = static_cast<unsigned char*>(out.data);
  return true;
}

bool plan(const sk_kernel_args* args, const KernelInfo& k, Plan* p, ErrorSink err) {
  const bool kv = k.kind == Kind::kKv;
  if (!check_arity(args, k.name, kv ? 5 : 4, kv ? 2 : 1, err)) return false;
  p->info = &k;
  p->elem = sk_dtype_size(k.cache_dtype);
  const sk_tensor_arg& slots = args->inputs[2];
  if (!check_tensor(slots, k.name, "slot_mapping", SK_DTYPE_I32, 1, err)) return false;
  char s1[96];
  if (slots.rank != 1) {
    return invalid(err, "%s: slot_mapping shape %s is not [T]", k.name, format_shape(slots, s1, sizeof s1));
  }
  const int64_t t = slots.shape[0];
  if (kv) {
    p->num_caches = 2;
    if (!plan_cache(args, k, 0, 3, 4, "k_cache", "k_cache out", &p->caches[0], err) ||
        !plan_cache(args, k, 1, 4, 4, "v_cache", "v_cache out", &p->caches[1], err)) {
      return false;
    }
    const sk_tensor_arg& kc = args->inputs[3];
    const sk_tensor_arg& vc = args->inputs[4];
    if (!same_shape(kc, vc)) {
      char s2[96];
      return invalid(err, "%s: v_cache shape %s differs from k_cache shape %s", k.name, format_shape(vc, s1, sizeof s1),
                     format_shape(kc, s2, sizeof s2));
    }
    const int64_t hkv = kc.shape[2];
    const int64_t dh = kc.shape[3];
    // Hkv may be 0: the caches and the new values then have no elements, and nothing is written.
    if (!plan_source(args->inputs[0], "k_new", 0, t, true, hkv, dh, 0, 0, &p->sources[0], k.name, err) ||
        !plan_source(args->inputs[1], "v_new", 1, t, true, hkv, dh, 1, 0, &p->sources[1], k.name, err)) {
      return false;
    }
    p->slots = kc.shape[0] * kc.shape[1];
    p->caches[0].row_bytes = p->caches[1].row_bytes = hkv * dh * p->elem;
  } else {
    p->num_caches = 1;
    if (!plan_cache(args, k, 0, 3, 3, "latent_cache", "latent_cache out", &p->caches[0], err)) return false;
    const sk_tensor_arg& lc = args->inputs[3];
    const sk_tensor_arg& ckv = args->inputs[0];
    const sk_tensor_arg& kpe = args->inputs[1];
    if (ckv.rank != 2 || kpe.rank != 2 || ckv.shape[1] + kpe.shape[1] != lc.shape[2]) {
      char s2[96];
      char s3[96];
      return invalid(err, "%s: c_kv %s and k_pe %s do not split the latent_cache row of %s", k.name,
                     format_shape(ckv, s1, sizeof s1), format_shape(kpe, s2, sizeof s2),
                     format_shape(lc, s3, sizeof s3));
    }
    const int64_t rank = ckv.shape[1];
    if (!plan_source(ckv, "c_kv", 0, t, false, 1, rank, 0, 0, &p->sources[0], k.name, err) ||
        !plan_source(kpe, "k_pe", 1, t, false, 1, kpe.shape[1], 0, rank, &p->sources[1], k.name, err)) {
      return false;
    }
    p->slots = lc.shape[0] * lc.shape[1];
    p->caches[0].row_bytes = lc.shape[2] * p->elem;
  }
  p->t = t;
  p->slot_mapping = static_cast<const int32_t*>(slots.data);
  p->slot_stride = slots.stride[0];
  return true;
}

// In token order, so the first bad slot reported is the same on every core.
bool check_slots(const Plan& p, ErrorSink err) {
  for (int64_t t = 0; t < p.t; ++t) {
    const int32_t s = p.slot_mapping[t * p.slot_stride];
    if (s >= p.slots) {
      return invalid(err, "%s: slot_mapping[%lld] = %d is out of range for a cache of %lld slots", p.info->name,
                     static_cast<long long>(t), s, static_cast<long long>(p.slots));
    }
  }
  return true;
}

int32_t run(const KernelInfo& k, const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, k.name, err) || !plan(args, k, &p, err) || !check_slots(p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.slots, core->core_id, core->num_cores, 1);
  if (r.begin >= r.end) return SK_OK;
  for (int c = 0; c < p.num_caches; ++c) {
    const Cache& cache = p.caches[c];
    if (cache.in != cache.out && cache.row_bytes > 0) {
      std::memcpy(cache.out + r.begin * cache.row_bytes, cache.in + r.begin * cache.row_bytes,
                  static_cast<size_t>((r.end - r.begin) * cache.row_bytes));
    }
  }
  const ToBf16Fn to_bf16 = select_to_bf16();
  for (int64_t t = 0; t < p.t; ++t) {
    const int64_t slot = p.slot_mapping[t * p.slot_stride];
    if (slot < r.begin || slot >= r.end) continue;
    for (const Source& s : p.sources) {
      if (s.heads == 0 || s.width == 0) continue;  // nothing to write (the cache may have no storage)
      unsigned char* row = p.caches[s.cache].out + slot * p.caches[s.cache].row_bytes + s.col * p.elem;
      for (int64_t h = 0; h < s.heads; ++h) {
        const float* src = s.data + t * s.stride_t + h * s.stride_h;
        unsigned char* dst = row + h * s.width * p.elem;
        if (k.cache_dtype == SK_DTYPE_F32) {
          std::memcpy(dst, src, static_cast<size_t>(s.width) * sizeof(float));
        } else {
          to_bf16(src, reinterpret_cast<uint16_t*>(dst), s.width);
        }
      }
    }
  }
  return SK_OK;
}

int32_t access(const KernelInfo& k, const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
               sk_access_range* ranges, int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, k, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  RangeList list(ranges, capacity);
  if (p.t > 0) {
    // Every core checks every slot.
    const int64_t last = (p.t - 1) * p.slot_stride;
    constexpr int64_t kI = sizeof(int32_t);
    list.add(2, SK_ACCESS_READ, std::min<int64_t>(0, last) * kI, (std::max<int64_t>(0, last) + 1) * kI);
  }
  const sk_range r = sk_split_range(p.slots, core_id, num_cores, 1);
  if (r.begin >= r.end) return list.finish();
  if (p.t > 0) {
    for (const Source& s : p.sources) {
      if (s.width > 0 && s.heads > 0) {
        list.add(s.operand, SK_ACCESS_READ, s.lo * 4, (s.hi + 1) * 4);
      }
    }
  }
  // Slots of this core that no token writes keep their old values: a read of the input cache
  // (a copy when the output is another buffer; when it is the same buffer, this is what
  // orders the update after the cache's earlier writers).
  for (int c = 0; c < p.num_caches; ++c) {
    const Cache& cache = p.caches[c];
    list.add(cache.in_operand, SK_ACCESS_READ, r.begin * cache.row_bytes, r.end * cache.row_bytes);
  }
  for (int c = 0; c < p.num_caches; ++c) {
    const Cache& cache = p.caches[c];
    list.add(cache.out_operand, SK_ACCESS_WRITE, r.begin * cache.row_bytes, r.end * cache.row_bytes);
  }
  return list.finish();
}

}  // namespace

#define SK_KV_CACHE_KERNEL(prefix, info)                                                                           \
  int32_t prefix##_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(info, args, core); }      \
  int32_t prefix##_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges, \
                          int32_t capacity) {                                                                      \
    return access(info, args, core_id, num_cores, ranges, capacity);                                               \
  }

SK_KV_CACHE_KERNEL(kv_append_f32, kKvF32)
SK_KV_CACHE_KERNEL(kv_append_bf16, kKvBf16)
SK_KV_CACHE_KERNEL(mla_cache_append_f32, kMlaF32)
SK_KV_CACHE_KERNEL(mla_cache_append_bf16, kMlaBf16)

#undef SK_KV_CACHE_KERNEL

}  // namespace sk::kernels
