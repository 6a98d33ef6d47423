// Hand-built kernel arguments for the direct kernel tests (error paths and tests beyond the case
// table): dense operands over owned, filled buffers, attributes and an optional per-core
// workspace, plus the lookup of a built-in kernel by name.
//
//   ManualArgs m;
//   m.in(SK_DTYPE_F32, {2, 8}).out(SK_DTYPE_F32, {2, 8}).attrs(sk_rms_norm_attrs{1e-5f});
//   float* x = m.in_data<float>(0);
//   const sk_kernel_desc* k = builtin_kernel("rms_norm.f32");
//   k->run(&m.args(), &ctx);
#ifndef SUPERKERNEL_TESTS_KERNELS_MANUAL_ARGS_H_
#define SUPERKERNEL_TESTS_KERNELS_MANUAL_ARGS_H_

#include <dlfcn.h>
#include <superkernel/kernel_abi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace sk::kernel_test {

// The built-in package's descriptor named `name`, or null.
inline const sk_kernel_desc* builtin_kernel(const char* name) {
  static void* handle = dlopen(SK_BUILTIN_PACKAGE_PATH, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  const auto table_fn = reinterpret_cast<sk_kernel_package_table_fn>(dlsym(handle, SK_KERNEL_PACKAGE_SYMBOL));
  if (table_fn == nullptr) return nullptr;
  const sk_kernel_package* pkg = table_fn();
  for (uint32_t i = 0; i < pkg->num_kernels; ++i) {
    if (std::strcmp(pkg->kernels[i].name, name) == 0) return &pkg->kernels[i];
  }
  return nullptr;
}

class ManualArgs {
 public:
  // Every operand buffer starts filled with `fill`.
  explicit ManualArgs(unsigned char fill = 0) : fill_(fill) {}

  ManualArgs& in(int32_t dtype, std::vector<int64_t> shape) {
    in_.push_back(make(dtype, std::move(shape)));
    return *this;
  }
  ManualArgs& out(int32_t dtype, std::vector<int64_t> shape) {
    out_.push_back(make(dtype, std::move(shape)));
    return *this;
  }
  // Adds an operand and returns its data.
  template <class T>
  T* in_ptr(int32_t dtype, std::vector<int64_t> shape) {
    in(dtype, std::move(shape));
    return in_data<T>(in_.size() - 1);
  }
  template <class T>
  T* out_ptr(int32_t dtype, std::vector<int64_t> shape) {
    out(dtype, std::move(shape));
    return out_data<T>(out_.size() - 1);
  }
  template <class A>
  ManualArgs& attrs(const A& a) {
    attrs_.resize(sizeof a);
    std::memcpy(attrs_.data(), &a, sizeof a);
    return *this;
  }
  // A per-core workspace for `cores` cores, as the runtime would plan it for kernel `k`.
  ManualArgs& workspace_for(const sk_kernel_desc* k, int cores) {
    ws_size_ = (k->workspace_size(&args()) + 63) / 64 * 64;
    workspace_.assign(static_cast<size_t>(ws_size_ * static_cast<uint64_t>(cores)) + 64, 0xEE);
    const auto addr = reinterpret_cast<uintptr_t>(workspace_.data());
    ws_ = workspace_.data() + (64 - addr % 64) % 64;
    return *this;
  }

  // Runs kernel `k`'s tiling on the operands as they are now (a tiling sink reads input data, so
  // fill the inputs first) and passes its result to every later call.
  bool tiling_from(const sk_kernel_desc* k) {
    tiling_.assign(64 * 1024, 0);
    uint32_t size = 0;
    if (k->tiling(&args(), tiling_.data(), static_cast<uint32_t>(tiling_.size()), &size) != SK_OK) return false;
    tiling_.resize(size);
    has_tiling_ = true;
    return true;
  }
  sk_tensor_arg& input(size_t i) { return in_[i]; }
  sk_tensor_arg& output(size_t i) { return out_[i]; }
  template <class T>
  T* in_data(size_t i) {
    return static_cast<T*>(in_[i].data);
  }
  template <class T>
  T* out_data(size_t i) {
    return static_cast<T*>(out_[i].data);
  }

  const sk_kernel_args& args() {
    args_ = sk_kernel_args{};
    args_.inputs = in_.data();
    args_.outputs = out_.data();
    args_.num_inputs = static_cast<int32_t>(in_.size());
    args_.num_outputs = static_cast<int32_t>(out_.size());
    args_.attrs = attrs_.empty() ? nullptr : attrs_.data();
    args_.attrs_size = static_cast<uint32_t>(attrs_.size());
    args_.tiling = has_tiling_ ? tiling_.data() : nullptr;
    args_.tiling_size = has_tiling_ ? static_cast<uint32_t>(tiling_.size()) : 0;
    args_.workspace = ws_;
    args_.workspace_size = ws_ != nullptr ? ws_size_ : 0;
    return args_;
  }

 private:
  sk_tensor_arg make(int32_t dtype, std::vector<int64_t> shape) {
    sk_tensor_arg t{};
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(shape.size());
    int64_t n = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      t.shape[d] = shape[d];
      t.stride[d] = n;
      n *= shape[d];
    }
    const size_t size = static_cast<size_t>(std::max<int64_t>(1, n) * std::max<int64_t>(1, sk_dtype_size(dtype)));
    buffers_.push_back(std::make_unique<unsigned char[]>(size));
    std::memset(buffers_.back().get(), fill_, size);
    t.data = buffers_.back().get();
    return t;
  }

  unsigned char fill_;
  std::vector<std::unique_ptr<unsigned char[]>> buffers_;
  std::vector<sk_tensor_arg> in_;
  std::vector<sk_tensor_arg> out_;
  std::vector<unsigned char> attrs_;
  std::vector<unsigned char> tiling_;
  bool has_tiling_ = false;
  std::vector<unsigned char> workspace_;
  unsigned char* ws_ = nullptr;
  uint64_t ws_size_ = 0;
  sk_kernel_args args_{};
};

}  // namespace sk::kernel_test

#endif  // SUPERKERNEL_TESTS_KERNELS_MANUAL_ARGS_H_
