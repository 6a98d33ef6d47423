// prefetch: pulls bytes [offset, offset + bytes) of `tensor` (relative to its data pointer) into
// the cache with read prefetch hints aimed at the outer (shared) levels, split between cores in
// 64-byte lines. It writes nothing and has no outputs, so no later op waits for it: it only warms
// the cache for whoever reads the range next. `depend_on` is read by no instruction; it is an
// operand so that the op runs after its producer (the access callback reports it as read).
//
// bytes == 0 is a no-op (the compile option `prefetch=false` turns every prefetch into one).
#include <cstring>

#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "superkernel/attrs_core.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "prefetch";
constexpr int64_t kLine = 64;

bool read_attrs(const sk_kernel_args* args, sk_prefetch_attrs* a, ErrorSink err) {
  if (!check_arity(args, kName, 2, 0, err)) return false;
  if (args->attrs == nullptr || args->attrs_size != sizeof(sk_prefetch_attrs))
    return invalid(err, "%s: attrs must be sk_prefetch_attrs (%zu bytes), got %u", kName, sizeof(sk_prefetch_attrs),
                   args->attrs_size);
  std::memcpy(a, args->attrs, sizeof *a);
  int64_t lo = 0;
  int64_t hi = 0;
  if (!view_byte_bounds(args->inputs[0], &lo, &hi)) lo = hi = 0;
  if (a->bytes < 0 || a->offset < lo || a->offset + a->bytes > hi)
    return invalid(err, "%s: byte range [%lld, %lld) is outside the tensor's bytes [%lld, %lld)", kName,
                   static_cast<long long>(a->offset), static_cast<long long>(a->offset + a->bytes),
                   static_cast<long long>(lo), static_cast<long long>(hi));
  return true;
}

// This core's share of the range, whole cache lines apart from the ends.
sk_range core_bytes(const sk_prefetch_attrs& a, int32_t core_id, int32_t num_cores) {
  sk_range r = sk_split_range(a.bytes, core_id, num_cores, kLine);
  r.begin += a.offset;
  r.end += a.offset;
  return r;
}

}  // namespace

int32_t prefetch_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  sk_prefetch_attrs a{};
  if (!check_core(core, kName, err) || !read_attrs(args, &a, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = core_bytes(a, core->core_id, core->num_cores);
  const char* base = static_cast<const char*>(args->inputs[0].data);
  // Locality 1 (prefetcht2 on x86): bring the line towards the outer caches without evicting the
  // compute cores' private working sets.
  for (int64_t b = r.begin; b < r.end; b += kLine) __builtin_prefetch(base + b, 0, 1);
  return SK_OK;
}

int32_t prefetch_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                        int32_t capacity) {
  sk_prefetch_attrs a{};
  if (!read_attrs(args, &a, ErrorSink{})) return SK_ERR_INVALID_ARGUMENT;
  int64_t dep_lo = 0;
  int64_t dep_hi = 0;
  const bool has_dep = view_byte_bounds(args->inputs[1], &dep_lo, &dep_hi);
  const sk_range r = core_bytes(a, core_id, num_cores);
  int32_t n = 0;
  if (r.end > r.begin) {
    if (n < capacity) ranges[n] = {0, SK_ACCESS_READ, r.begin, r.end};
    ++n;
  }
  if (has_dep) {
    if (n < capacity) ranges[n] = {1, SK_ACCESS_READ, dep_lo, dep_hi};
    ++n;
  }
  return n;
}

}  // namespace sk::kernels
