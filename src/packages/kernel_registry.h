// Loads kernel packages (shared objects exporting `sk_kernel_package_table`) and looks kernels
// up by name. The built-in package goes through the same loader as user packages.
//
//   KernelRegistry reg;
//   if (Status s = reg.load_package("build/lib/libmy_kernels.so"); !s) report(s);
//   const KernelEntry* k = reg.find("scale2.f32");
#ifndef SUPERKERNEL_PACKAGES_KERNEL_REGISTRY_H_
#define SUPERKERNEL_PACKAGES_KERNEL_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "superkernel/kernel_abi.h"
#include "superkernel/status.h"

namespace sk {

struct KernelEntry {
  const sk_kernel_desc* desc = nullptr;
  std::string package;          // package name from its table
  std::string path;             // file it was loaded from
  uint64_t run_code_bytes = 0;  // ELF size of the run entry's symbol; 0 when it is not exported
};

class KernelRegistry {
 public:
  KernelRegistry() = default;
  ~KernelRegistry();
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // dlopens `path` and registers every kernel of its table. All or nothing: on any error no
  // kernel of the package is registered. Errors name the file and the kernel.
  Status load_package(const std::string& path);
  // Registers a table that is already in memory (`origin` names it in errors).
  Status add_package(const sk_kernel_package* table, const std::string& origin);

  const KernelEntry* find(std::string_view name) const;
  // Kernel replication: `copies` descriptors of `kernel`, each from its own copy of the package
  // at its own addresses (element 0 is `kernel` itself). The extra copies are loaded once per
  // package, from private copies of its file (dlopen loads one file only once), and live as long
  // as the registry. Thread-safe; errors name the package.
  Expected<std::vector<const sk_kernel_desc*>> replicas(const KernelEntry& kernel, int copies) const;
  std::vector<std::string> kernel_names() const;  // sorted
  std::vector<std::string> package_paths() const;

 private:
  std::unordered_map<std::string, KernelEntry> kernels_;
  std::vector<void*> handles_;
  std::vector<std::string> paths_;
  std::vector<std::string> canonical_paths_;
  struct Replica {
    void* handle = nullptr;
    const sk_kernel_package* table = nullptr;
  };
  mutable std::mutex replica_mu_;
  mutable std::map<std::string, std::vector<Replica>> replicas_;  // package file -> extra copies
};

// Path of the built-in package next to libsuperkernel.so (or $SK_BUILTIN_KERNELS).
std::string builtin_package_path();

}  // namespace sk

#endif  // SUPERKERNEL_PACKAGES_KERNEL_REGISTRY_H_
