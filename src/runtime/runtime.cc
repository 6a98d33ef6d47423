#include "superkernel/runtime.h"

#include "runtime/runtime_impl.h"

namespace sk {

Runtime::Runtime() : impl_(std::make_unique<Impl>()) {}
Runtime::~Runtime() = default;

Expected<std::shared_ptr<Runtime>> Runtime::create(const RuntimeOptions& options) {
  if (options.num_cores > kMaxRuntimeCores)
    return Status::invalid_argument("runtime option 'num_cores' = " + std::to_string(options.num_cores) +
                                    " exceeds the limit of " + std::to_string(kMaxRuntimeCores) + " cores");
  if (options.chunk_bytes != 0 && (options.chunk_bytes < kMinChunkBytes || options.chunk_bytes > kMaxChunkBytes))
    return Status::invalid_argument("runtime option 'chunk_bytes' = " + std::to_string(options.chunk_bytes) +
                                    ": must be 0 (no helper) or in [" + std::to_string(kMinChunkBytes) + ", " +
                                    std::to_string(kMaxChunkBytes) + "]");
  cpu::CpuDeviceOptions dev;
  dev.num_cores = options.num_cores;
  dev.cube_cores = options.cube_cores;
  dev.pin_threads = options.pin_threads;
  dev.pin_caller = options.pin_threads;
  dev.allow_oversubscribe = options.allow_oversubscribe;
  dev.spin_us = options.spin_us;
  dev.watchdog_seconds = options.watchdog_seconds;
  dev.load_policy = options.load_policy;
  dev.chunk_bytes = options.chunk_bytes;
  auto device = cpu::CpuDevice::create(dev);
  if (!device) return device.status();
  std::shared_ptr<Runtime> rt(new Runtime());
  rt->impl_->options = options;
  rt->impl_->device = std::move(*device);
  if (options.load_builtin_kernels) {
    Status s = rt->impl_->registry.load_package(builtin_package_path());
    if (!s) return s.with_context("loading the built-in kernels (set SK_BUILTIN_KERNELS to override the path)");
  }
  for (const std::string& path : options.kernel_packages) SK_RETURN_IF_ERROR(rt->impl_->registry.load_package(path));
  return rt;
}

Status Runtime::load_kernel_package(const std::string& path) { return impl_->registry.load_package(path); }
std::vector<std::string> Runtime::kernel_names() const { return impl_->registry.kernel_names(); }
int Runtime::num_cores() const { return impl_->device->num_cores(); }
int64_t Runtime::one_thread_launches() const { return impl_->device->one_thread_launches(); }

int64_t Runtime::shared_calls() const { return impl_->device->shared_calls(); }

Expected<LoadPolicy> parse_load_policy(std::string_view text) {
  for (LoadPolicy p : {LoadPolicy::kAdaptive, LoadPolicy::kStatic, LoadPolicy::kOneThread})
    if (text == load_policy_name(p)) return p;
  return Status::invalid_argument("load_policy '" + std::string(text) +
                                  "' is not one of: adaptive, static, one_thread");
}

const char* load_policy_name(LoadPolicy policy) {
  switch (policy) {
    case LoadPolicy::kStatic:
      return "static";
    case LoadPolicy::kOneThread:
      return "one_thread";
    case LoadPolicy::kAdaptive:
      break;
  }
  return "adaptive";
}

std::string Runtime::cpu_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  return "scalar";
}

}  // namespace sk
