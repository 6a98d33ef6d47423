// Loads kernel packages (shared objects exporting `sk_kernel_package_table`) and looks kernels
// up by name. The built-in package goes through the same loader as user packages.
//
//   KernelRegistry reg;
//   if (Status s = reg.load_package("build/lib/libmy_kernels.so"); !s) report(s);
//   const KernelEntry* k = reg.find("scale2.f32");
#ifndef SUPERKERNEL_PACKAGES_KERNEL_REGISTRY_H_
#define SUPERKERNEL_PACKAGES_KERNEL_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "superkernel/kernel_abi.h"
#include "superkernel/status.h"

namespace sk {

struct KernelEntry {
  const sk_kernel_desc* desc = nullptr;
  std::string package;  // package name from its table
  std::string path;     // file it was loaded from
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
  std::vector<std::string> kernel_names() const;  // sorted
  std::vector<std::string> package_paths() const;

 private:
  std::unordered_map<std::string, KernelEntry> kernels_;
  std::vector<void*> handles_;
  std::vector<std::string> paths_;
  std::vector<std::string> canonical_paths_;
};

// Path of the built-in package next to libsuperkernel.so (or $SK_BUILTIN_KERNELS).
std::string builtin_package_path();

}  // namespace sk

#endif  // SUPERKERNEL_PACKAGES_KERNEL_REGISTRY_H_
