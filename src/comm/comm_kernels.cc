// The collective kernels (package libsk_kernels_comm.so): AllReduce, ReduceScatter, AllGather,
// AlltoAll and AlltoAllv fuse into super kernels; Broadcast is communication that does not fuse.
// Each runs on the first core of its op (the other cores return at once and declare no access),
// so inside a super kernel the op's other cores, and every other stream's, go on computing what
// does not depend on it; its consumers wait for that core like for any producer. Messages are
// non-blocking MPI point-to-point requests, polled (Exchange::wait_all). Contracts: docs/COMM.md.
#include <algorithm>
#include <cstring>

#include "comm/exchange.h"
#include "comm/reduce_sum.h"

namespace sk::comm {
namespace {

constexpr int32_t kPhaseCounts = 0, kPhasePayload = 1, kPhaseReduce = 2, kPhaseGather = 3;

int64_t bytes_of(const sk_tensor_arg& t) { return sk_tensor_numel(&t) * sk_dtype_size(t.dtype); }
uint8_t* bytes_at(const sk_tensor_arg& t, int64_t offset) { return static_cast<uint8_t*>(t.data) + offset; }
uint64_t round_up_64(uint64_t n) { return (n + 63) / 64 * 64; }

// The attributes as workspace_size sees them (before any operand has an address).
sk_comm_attrs attrs_of(const sk_kernel_args* a) {
  sk_comm_attrs attrs{};
  if (a->attrs != nullptr && a->attrs_size == sizeof(attrs)) std::memcpy(&attrs, a->attrs, sizeof(attrs));
  if (attrs.size < 1) attrs.size = 1;
  if (attrs.groups < 1) attrs.groups = 1;
  return attrs;
}

// Every collective: core 0 reads each input and writes each output whole; the others touch nothing.
int32_t collective_access(const sk_kernel_args* a, int32_t core_id, int32_t, sk_access_range* ranges,
                          int32_t capacity) {
  if (core_id != 0) return 0;
  const int32_t n = a->num_inputs + a->num_outputs;
  for (int32_t i = 0; i < n && i < capacity; ++i) {
    const bool input = i < a->num_inputs;
    const sk_tensor_arg& t = input ? a->inputs[i] : a->outputs[i - a->num_inputs];
    ranges[i] = {i, input ? SK_ACCESS_READ : SK_ACCESS_WRITE, 0, bytes_of(t)};
  }
  return n;
}

int32_t check_dense(Exchange& x, const sk_tensor_arg& t, const char* what) {
  if (t.data == nullptr && bytes_of(t) > 0) return x.fail(SK_ERR_INVALID_ARGUMENT, "%s has no data", what);
  if (!sk_tensor_is_contiguous(&t))
    return x.fail(SK_ERR_INVALID_ARGUMENT, "%s must be dense (copy a strided view first)", what);
  return SK_OK;
}

// Checks operand counts and dtypes, resolves the communicator. SK_OK or an error.
int32_t start(Exchange& x, const sk_kernel_args* a, int32_t inputs, int32_t outputs, int32_t reduce_dtype) {
  if (int32_t rc = x.begin(); rc != SK_OK) return rc;
  if (a->num_inputs != inputs || a->num_outputs != outputs)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "expects %d input(s) and %d output(s), got %d and %d", inputs, outputs,
                  a->num_inputs, a->num_outputs);
  if (int32_t rc = check_dense(x, a->inputs[0], "input 0"); rc != SK_OK) return rc;
  if (int32_t rc = check_dense(x, a->outputs[0], "output 0"); rc != SK_OK) return rc;
  if (a->inputs[0].dtype != a->outputs[0].dtype)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "input and output dtypes differ");
  if (reduce_dtype >= 0 && a->inputs[0].dtype != reduce_dtype)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "input dtype %d is not the kernel's dtype %d", a->inputs[0].dtype,
                  reduce_dtype);
  return SK_OK;
}

// The array of source pointers reduce_sum takes, after the request arrays.
uint64_t sources_bytes(int32_t ranks) { return round_up_64(static_cast<uint64_t>(ranks) * sizeof(void*)); }

// Names per reduction dtype, indexed by sk_dtype (f32, bf16, f16, -, i32).
const char* reduction_name(const char* op, int32_t dtype) {
  static const char* const kAllReduce[] = {"comm.all_reduce.f32", "comm.all_reduce.bf16", "comm.all_reduce.f16", "",
                                           "comm.all_reduce.i32"};
  static const char* const kReduceScatter[] = {"comm.reduce_scatter.f32", "comm.reduce_scatter.bf16",
                                               "comm.reduce_scatter.f16", "", "comm.reduce_scatter.i32"};
  return (std::strcmp(op, "all_reduce") == 0 ? kAllReduce : kReduceScatter)[dtype];
}

// ---- AllReduce: a reduce-scatter over sk_split_range chunks, then an all-gather ---------------

sk_range chunk(int64_t n, int32_t part, int32_t parts) { return sk_split_range(n, part, parts, 16); }
int64_t max_chunk(int64_t n, int32_t parts) { return ((n + 15) / 16 + parts - 1) / parts * 16; }

uint64_t all_reduce_workspace(const sk_kernel_args* a) {
  const sk_comm_attrs attrs = attrs_of(a);
  const int64_t elem = sk_dtype_size(a->inputs[0].dtype);
  const int64_t staging = (attrs.size - 1) * max_chunk(sk_tensor_numel(&a->inputs[0]), attrs.size) * elem;
  return request_bytes(2 * attrs.size) + sources_bytes(attrs.size) + round_up_64(static_cast<uint64_t>(staging));
}

template <int32_t kDType>
int32_t all_reduce_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  if (core->core_id != 0) return SK_OK;
  const sk_comm_attrs attrs = attrs_of(a);
  Exchange x(reduction_name("all_reduce", kDType), a, core, a->workspace, 2 * attrs.size);
  if (int32_t rc = start(x, a, 1, 1, kDType); rc != SK_OK) return rc;
  const sk_tensor_arg& in = a->inputs[0];
  const sk_tensor_arg& out = a->outputs[0];
  if (sk_tensor_numel(&in) != sk_tensor_numel(&out))
    return x.fail(SK_ERR_INVALID_ARGUMENT, "output has %lld elements, input %lld", (long long)sk_tensor_numel(&out),
                  (long long)sk_tensor_numel(&in));
  const int32_t n = x.size(), me = x.rank();
  const int64_t count = sk_tensor_numel(&in), elem = sk_dtype_size(kDType);
  if (n == 1) {
    if (out.data != in.data) std::memcpy(out.data, in.data, static_cast<size_t>(count * elem));
    return SK_OK;
  }
  auto* sources = reinterpret_cast<const void**>(static_cast<uint8_t*>(a->workspace) + request_bytes(2 * n));
  uint8_t* staging = static_cast<uint8_t*>(a->workspace) + request_bytes(2 * n) + sources_bytes(n);
  const int64_t slot_bytes = max_chunk(count, n) * elem;
  const sk_range mine = chunk(count, me, n);
  auto slot = [&](int32_t s) { return staging + (s < me ? s : s - 1) * slot_bytes; };
  // Reduce-scatter: every rank's share of my chunk comes to me (an in-place call sends the other
  // chunks before anything is written: the writes come after this phase completes).
  for (int32_t s = 0; s < n; ++s)
    if (s != me)
      if (int32_t rc = x.recv(slot(s), (mine.end - mine.begin) * elem, s, kPhaseReduce); rc != SK_OK) return rc;
  for (int32_t q = 0; q < n; ++q) {
    if (q == me) continue;
    const sk_range theirs = chunk(count, q, n);
    if (int32_t rc = x.send(bytes_at(in, theirs.begin * elem), (theirs.end - theirs.begin) * elem, q, kPhaseReduce);
        rc != SK_OK)
      return rc;
  }
  if (int32_t rc = x.wait_all(); rc != SK_OK) return rc;
  for (int32_t s = 0; s < n; ++s) sources[s] = s == me ? bytes_at(in, mine.begin * elem) : slot(s);
  reduce_sum(kDType, sources, n, bytes_at(out, mine.begin * elem), mine.end - mine.begin);
  // All-gather: my reduced chunk to everyone, everyone's to me.
  for (int32_t s = 0; s < n; ++s) {
    if (s == me) continue;
    const sk_range theirs = chunk(count, s, n);
    if (int32_t rc = x.recv(bytes_at(out, theirs.begin * elem), (theirs.end - theirs.begin) * elem, s, kPhaseGather);
        rc != SK_OK)
      return rc;
  }
  for (int32_t q = 0; q < n; ++q)
    if (q != me)
      if (int32_t rc = x.send(bytes_at(out, mine.begin * elem), (mine.end - mine.begin) * elem, q, kPhaseGather);
          rc != SK_OK)
        return rc;
  return x.wait_all();
}

// ---- ReduceScatter: x [n * M, ...] -> y [M, ...], block r of the sum on rank r ---------------

uint64_t reduce_scatter_workspace(const sk_kernel_args* a) {
  const sk_comm_attrs attrs = attrs_of(a);
  const int64_t block = bytes_of(a->inputs[0]) / attrs.size;
  return request_bytes(2 * attrs.size) + sources_bytes(attrs.size) +
         round_up_64(static_cast<uint64_t>((attrs.size - 1) * block));
}

template <int32_t kDType>
int32_t reduce_scatter_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  if (core->core_id != 0) return SK_OK;
  const sk_comm_attrs attrs = attrs_of(a);
  Exchange x(reduction_name("reduce_scatter", kDType), a, core, a->workspace, 2 * attrs.size);
  if (int32_t rc = start(x, a, 1, 1, kDType); rc != SK_OK) return rc;
  const sk_tensor_arg& in = a->inputs[0];
  const sk_tensor_arg& out = a->outputs[0];
  const int32_t n = x.size(), me = x.rank();
  const int64_t count = sk_tensor_numel(&out), elem = sk_dtype_size(kDType), block = count * elem;
  if (sk_tensor_numel(&in) != count * n)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "input has %lld elements; expected %d ranks x %lld",
                  (long long)sk_tensor_numel(&in), n, (long long)count);
  if (out.data == in.data && n > 1) return x.fail(SK_ERR_INVALID_ARGUMENT, "output aliases the input");
  auto* sources = reinterpret_cast<const void**>(static_cast<uint8_t*>(a->workspace) + request_bytes(2 * n));
  uint8_t* staging = static_cast<uint8_t*>(a->workspace) + request_bytes(2 * n) + sources_bytes(n);
  auto slot = [&](int32_t s) { return staging + (s < me ? s : s - 1) * block; };
  for (int32_t s = 0; s < n; ++s)
    if (s != me)
      if (int32_t rc = x.recv(slot(s), block, s, kPhaseReduce); rc != SK_OK) return rc;
  for (int32_t q = 0; q < n; ++q)
    if (q != me)
      if (int32_t rc = x.send(bytes_at(in, q * block), block, q, kPhaseReduce); rc != SK_OK) return rc;
  if (int32_t rc = x.wait_all(); rc != SK_OK) return rc;
  for (int32_t s = 0; s < n; ++s) sources[s] = s == me ? bytes_at(in, me * block) : slot(s);
  reduce_sum(kDType, sources, n, out.data, count);
  return SK_OK;
}

// ---- AllGather: x [M, ...] -> y [n * M, ...], block q from rank q ----------------------------

uint64_t requests_workspace(const sk_kernel_args* a) { return request_bytes(2 * attrs_of(a).size); }

int32_t all_gather_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  if (core->core_id != 0) return SK_OK;
  Exchange x("comm.all_gather", a, core, a->workspace, 2 * attrs_of(a).size);
  if (int32_t rc = start(x, a, 1, 1, -1); rc != SK_OK) return rc;
  const sk_tensor_arg& in = a->inputs[0];
  const sk_tensor_arg& out = a->outputs[0];
  const int32_t n = x.size(), me = x.rank();
  const int64_t block = bytes_of(in);
  if (bytes_of(out) != block * n)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "output has %lld bytes; expected %d ranks x %lld", (long long)bytes_of(out),
                  n, (long long)block);
  if (out.data == in.data && n > 1) return x.fail(SK_ERR_INVALID_ARGUMENT, "output aliases the input");
  for (int32_t s = 0; s < n; ++s)
    if (s != me)
      if (int32_t rc = x.recv(bytes_at(out, s * block), block, s, kPhaseGather); rc != SK_OK) return rc;
  for (int32_t q = 0; q < n; ++q)
    if (q != me)
      if (int32_t rc = x.send(in.data, block, q, kPhaseGather); rc != SK_OK) return rc;
  if (out.data != in.data) std::memcpy(bytes_at(out, me * block), in.data, static_cast<size_t>(block));
  return x.wait_all();
}

// ---- AlltoAll: x [n * M, ...] -> y [n * M, ...]: block q of x to rank q ----------------------

int32_t all_to_all_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  if (core->core_id != 0) return SK_OK;
  Exchange x("comm.all_to_all", a, core, a->workspace, 2 * attrs_of(a).size);
  if (int32_t rc = start(x, a, 1, 1, -1); rc != SK_OK) return rc;
  const sk_tensor_arg& in = a->inputs[0];
  const sk_tensor_arg& out = a->outputs[0];
  const int32_t n = x.size(), me = x.rank();
  const int64_t total = bytes_of(in);
  if (bytes_of(out) != total || total % n != 0)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "input and output must have the same size, a multiple of %d blocks", n);
  if (out.data == in.data && n > 1) return x.fail(SK_ERR_INVALID_ARGUMENT, "output aliases the input");
  const int64_t block = total / n;
  for (int32_t s = 0; s < n; ++s)
    if (s != me)
      if (int32_t rc = x.recv(bytes_at(out, s * block), block, s, kPhasePayload); rc != SK_OK) return rc;
  for (int32_t q = 0; q < n; ++q)
    if (q != me)
      if (int32_t rc = x.send(bytes_at(in, q * block), block, q, kPhasePayload); rc != SK_OK) return rc;
  if (out.data != in.data) std::memcpy(bytes_at(out, me * block), bytes_at(in, me * block), static_cast<size_t>(block));
  return x.wait_all();
}

// ---- AlltoAllv: counts first, then rows, in (rank, group) blocks -----------------------------
//
// inputs: x [R_in, ...], send_counts i32 [n * G]; outputs: y [R_out, ...], recv_counts i32
// [n * G], group_counts i32 [G]. Block (q, g) of x, send_counts[q * G + g] rows, goes to rank q;
// block (s, g) of y comes from rank s. The layouts say in which order the blocks follow each
// other (rank-major: (0,0) (0,1) .. (1,0) ..; group-major: (0,0) (1,0) .. (0,1) ..). One message
// per pair of ranks: a group-major side packs (or unpacks) its blocks through the workspace.

int64_t row_bytes(const sk_tensor_arg& t) { return t.rank == 0 || t.shape[0] == 0 ? 0 : bytes_of(t) / t.shape[0]; }

// Row offsets of every (rank, group) block on both sides, after the request arrays.
uint64_t offsets_bytes(const sk_comm_attrs& attrs) {
  return round_up_64(2 * static_cast<uint64_t>(attrs.size) * static_cast<uint64_t>(attrs.groups) * sizeof(int64_t));
}

uint64_t all_to_all_v_workspace(const sk_kernel_args* a) {
  const sk_comm_attrs attrs = attrs_of(a);
  uint64_t bytes = request_bytes(2 * attrs.size) + offsets_bytes(attrs);
  if (attrs.in_layout == SK_COMM_GROUP_MAJOR) bytes += round_up_64(static_cast<uint64_t>(bytes_of(a->inputs[0])));
  if (attrs.out_layout == SK_COMM_GROUP_MAJOR) bytes += round_up_64(static_cast<uint64_t>(bytes_of(a->outputs[0])));
  return bytes;
}

// Row offsets of every (rank, group) block laid out in `layout`: offsets[r * G + g].
void block_offsets(const int32_t* counts, int32_t n, int32_t groups, int32_t layout, int64_t* offsets) {
  int64_t at = 0;
  if (layout == SK_COMM_RANK_MAJOR) {
    for (int32_t r = 0; r < n; ++r)
      for (int32_t g = 0; g < groups; ++g) {
        offsets[r * groups + g] = at;
        at += counts[r * groups + g];
      }
  } else {
    for (int32_t g = 0; g < groups; ++g)
      for (int32_t r = 0; r < n; ++r) {
        offsets[r * groups + g] = at;
        at += counts[r * groups + g];
      }
  }
}

int32_t check_counts(Exchange& x, const int32_t* counts, int64_t total_allowed, int32_t n, int32_t groups,
                     const char* what, int64_t* total) {
  *total = 0;
  for (int32_t i = 0; i < n * groups; ++i) {
    if (counts[i] < 0)
      return x.fail(SK_ERR_INVALID_ARGUMENT, "%s[%d] (rank %d, group %d) = %d is negative", what, i, i / groups,
                    i % groups, counts[i]);
    *total += counts[i];
  }
  if (*total > total_allowed)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "%s add up to %lld rows, more than the %lld rows of its buffer", what,
                  (long long)*total, (long long)total_allowed);
  return SK_OK;
}

int32_t all_to_all_v_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  if (core->core_id != 0) return SK_OK;
  const sk_comm_attrs attrs = attrs_of(a);
  Exchange x("comm.all_to_all_v", a, core, a->workspace, 2 * attrs.size);
  if (int32_t rc = start(x, a, 2, 3, -1); rc != SK_OK) return rc;
  const sk_tensor_arg& in = a->inputs[0];
  const sk_tensor_arg& send_counts_arg = a->inputs[1];
  const sk_tensor_arg& out = a->outputs[0];
  const sk_tensor_arg& recv_counts_arg = a->outputs[1];
  const sk_tensor_arg& group_counts_arg = a->outputs[2];
  const int32_t n = x.size(), me = x.rank(), groups = attrs.groups;
  for (const sk_tensor_arg* t : {&send_counts_arg, &recv_counts_arg})
    if (t->dtype != SK_DTYPE_I32 || sk_tensor_numel(t) != static_cast<int64_t>(n) * groups ||
        !sk_tensor_is_contiguous(t))
      return x.fail(SK_ERR_INVALID_ARGUMENT, "send and receive counts must be dense i32 [%d ranks x %d groups]", n,
                    groups);
  if (group_counts_arg.dtype != SK_DTYPE_I32 || sk_tensor_numel(&group_counts_arg) != groups)
    return x.fail(SK_ERR_INVALID_ARGUMENT, "group counts must be i32 [%d]", groups);
  if (in.rank < 1 || out.rank < 1 || row_bytes(in) != row_bytes(out))
    return x.fail(SK_ERR_INVALID_ARGUMENT, "input and output rows must have the same size");
  if (out.data == in.data && bytes_of(out) > 0) return x.fail(SK_ERR_INVALID_ARGUMENT, "output aliases the input");
  for (int32_t layout : {attrs.in_layout, attrs.out_layout})
    if (layout != SK_COMM_RANK_MAJOR && layout != SK_COMM_GROUP_MAJOR)
      return x.fail(SK_ERR_INVALID_ARGUMENT, "layout %d is neither rank-major (0) nor group-major (1)", layout);
  const auto* send_counts = static_cast<const int32_t*>(send_counts_arg.data);
  auto* recv_counts = static_cast<int32_t*>(recv_counts_arg.data);
  const int64_t rb = row_bytes(in);
  int64_t send_total = 0, recv_total = 0;
  // Bad counts are found before anything is sent, so no rank receives rows that are not there.
  if (int32_t rc = check_counts(x, send_counts, in.shape[0], n, groups, "send_counts", &send_total); rc != SK_OK)
    return rc;

  // Phase 1: the counts.
  for (int32_t s = 0; s < n; ++s)
    if (s != me)
      if (int32_t rc = x.recv(recv_counts + s * groups, groups * 4, s, kPhaseCounts); rc != SK_OK) return rc;
  for (int32_t q = 0; q < n; ++q)
    if (q != me)
      if (int32_t rc = x.send(send_counts + q * groups, groups * 4, q, kPhaseCounts); rc != SK_OK) return rc;
  std::memcpy(recv_counts + me * groups, send_counts + me * groups, static_cast<size_t>(groups) * 4);
  if (int32_t rc = x.wait_all(); rc != SK_OK) return rc;
  if (int32_t rc = check_counts(x, recv_counts, out.shape[0], n, groups, "received counts", &recv_total); rc != SK_OK)
    return rc;
  auto* group_counts = static_cast<int32_t*>(group_counts_arg.data);
  for (int32_t g = 0; g < groups; ++g) {
    group_counts[g] = 0;
    for (int32_t s = 0; s < n; ++s) group_counts[g] += recv_counts[s * groups + g];
  }

  // Phase 2: the rows.
  auto* in_off = reinterpret_cast<int64_t*>(static_cast<uint8_t*>(a->workspace) + request_bytes(2 * n));
  int64_t* out_off = in_off + static_cast<int64_t>(n) * groups;
  block_offsets(send_counts, n, groups, attrs.in_layout, in_off);
  block_offsets(recv_counts, n, groups, attrs.out_layout, out_off);
  uint8_t* tail = static_cast<uint8_t*>(a->workspace) + request_bytes(2 * n) + offsets_bytes(attrs);
  uint8_t* pack = attrs.in_layout == SK_COMM_GROUP_MAJOR ? tail : nullptr;
  uint8_t* unpack = attrs.out_layout == SK_COMM_GROUP_MAJOR
                        ? tail + (pack ? round_up_64(static_cast<uint64_t>(bytes_of(in))) : 0)
                        : nullptr;
  auto rows_to = [&](const int32_t* counts, int32_t r) {
    int64_t rows = 0;
    for (int32_t g = 0; g < groups; ++g) rows += counts[r * groups + g];
    return rows;
  };
  // Receives: straight into y when the blocks of one source are contiguous there (rank-major),
  // else into the unpack area, source after source.
  int64_t unpack_at = 0;
  for (int32_t s = 0; s < n; ++s) {
    if (s == me) continue;
    const int64_t rows = rows_to(recv_counts, s);
    uint8_t* dst = unpack ? unpack + unpack_at * rb : bytes_at(out, out_off[s * groups] * rb);
    if (int32_t rc = x.recv(dst, rows * rb, s, kPhasePayload); rc != SK_OK) return rc;
    unpack_at += rows;
  }
  int64_t pack_at = 0;
  for (int32_t q = 0; q < n; ++q) {
    if (q == me) continue;
    const int64_t rows = rows_to(send_counts, q);
    const uint8_t* src = bytes_at(in, in_off[q * groups] * rb);
    if (pack) {
      uint8_t* at = pack + pack_at * rb;
      for (int32_t g = 0; g < groups; ++g) {
        const int64_t c = send_counts[q * groups + g];
        std::memcpy(at, bytes_at(in, in_off[q * groups + g] * rb), static_cast<size_t>(c * rb));
        at += c * rb;
      }
      src = pack + pack_at * rb;
      pack_at += rows;
    }
    if (int32_t rc = x.send(src, rows * rb, q, kPhasePayload); rc != SK_OK) return rc;
  }
  for (int32_t g = 0; g < groups; ++g)
    std::memcpy(bytes_at(out, out_off[me * groups + g] * rb), bytes_at(in, in_off[me * groups + g] * rb),
                static_cast<size_t>(send_counts[me * groups + g] * rb));
  if (int32_t rc = x.wait_all(); rc != SK_OK) return rc;
  if (unpack) {
    unpack_at = 0;
    for (int32_t s = 0; s < n; ++s) {
      if (s == me) continue;
      for (int32_t g = 0; g < groups; ++g) {
        const int64_t c = recv_counts[s * groups + g];
        std::memcpy(bytes_at(out, out_off[s * groups + g] * rb), unpack + unpack_at * rb, static_cast<size_t>(c * rb));
        unpack_at += c;
      }
    }
  }
  // Rows past the received ones are zero, so the whole output is defined (as moe_dispatch's).
  std::memset(bytes_at(out, recv_total * rb), 0, static_cast<size_t>((out.shape[0] - recv_total) * rb));
  return SK_OK;
}

// ---- Broadcast (not fusible): the root's x to every rank --------------------------------------

int32_t broadcast_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  if (core->core_id != 0) return SK_OK;
  Exchange x("comm.broadcast", a, core, a->workspace, 2 * attrs_of(a).size);
  if (int32_t rc = start(x, a, 1, 1, -1); rc != SK_OK) return rc;
  const sk_tensor_arg& in = a->inputs[0];
  const sk_tensor_arg& out = a->outputs[0];
  const int32_t n = x.size(), me = x.rank(), root = x.attrs().root;
  if (root < 0 || root >= n) return x.fail(SK_ERR_INVALID_ARGUMENT, "root %d is not a rank of %d", root, n);
  if (bytes_of(in) != bytes_of(out)) return x.fail(SK_ERR_INVALID_ARGUMENT, "input and output sizes differ");
  if (me == root) {
    for (int32_t q = 0; q < n; ++q)
      if (q != me)
        if (int32_t rc = x.send(in.data, bytes_of(in), q, kPhasePayload); rc != SK_OK) return rc;
    if (out.data != in.data) std::memcpy(out.data, in.data, static_cast<size_t>(bytes_of(in)));
  } else if (int32_t rc = x.recv(out.data, bytes_of(out), root, kPhasePayload); rc != SK_OK) {
    return rc;
  }
  return x.wait_all();
}

#define SK_COMM_REDUCTION(op, suffix, dtype)                                                                         \
  {                                                                                                                  \
    SK_KERNEL_ABI_VERSION, "comm." #op "." #suffix, SK_KERNEL_VECTOR, SK_FUSIBLE, op##_run<dtype>, nullptr, nullptr, \
        op##_workspace, collective_access, 0                                                                         \
  }

const sk_kernel_desc kKernels[] = {
    SK_COMM_REDUCTION(all_reduce, f32, SK_DTYPE_F32),
    SK_COMM_REDUCTION(all_reduce, bf16, SK_DTYPE_BF16),
    SK_COMM_REDUCTION(all_reduce, f16, SK_DTYPE_F16),
    SK_COMM_REDUCTION(all_reduce, i32, SK_DTYPE_I32),
    SK_COMM_REDUCTION(reduce_scatter, f32, SK_DTYPE_F32),
    SK_COMM_REDUCTION(reduce_scatter, bf16, SK_DTYPE_BF16),
    SK_COMM_REDUCTION(reduce_scatter, f16, SK_DTYPE_F16),
    SK_COMM_REDUCTION(reduce_scatter, i32, SK_DTYPE_I32),
    {SK_KERNEL_ABI_VERSION, "comm.all_gather", SK_KERNEL_VECTOR, SK_FUSIBLE, all_gather_run, nullptr, nullptr,
     requests_workspace, collective_access, 0},
    {SK_KERNEL_ABI_VERSION, "comm.all_to_all", SK_KERNEL_VECTOR, SK_FUSIBLE, all_to_all_run, nullptr, nullptr,
     requests_workspace, collective_access, 0},
    {SK_KERNEL_ABI_VERSION, "comm.all_to_all_v", SK_KERNEL_VECTOR, SK_FUSIBLE, all_to_all_v_run, nullptr, nullptr,
     all_to_all_v_workspace, collective_access, 0},
    // Communication, but not one of the four collectives that fuse: it cuts the segment.
    {SK_KERNEL_ABI_VERSION, "comm.broadcast", SK_KERNEL_VECTOR, 0, broadcast_run, nullptr, nullptr, requests_workspace,
     collective_access, 0},
};
const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "comm", sizeof(kKernels) / sizeof(kKernels[0]), kKernels};

}  // namespace
}  // namespace sk::comm

extern "C" SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &sk::comm::kPackage; }
