#include "packages/kernel_registry.h"

#include <dlfcn.h>

#include <cstdio>

#include <link.h>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <map>

namespace sk {

KernelRegistry::~KernelRegistry() {
  // Kernel function pointers die with their package; executables hold the registry alive.
  for (const auto& [path, copies] : replicas_)
    for (const Replica& r : copies) dlclose(r.handle);
  for (void* h : handles_) dlclose(h);
}

namespace {

// Size of the symbol `fn` starts, when the dynamic symbol table has one starting exactly there.
uint64_t symbol_bytes(const void* fn) {
  Dl_info info;
  void* sym = nullptr;
  if (!dladdr1(fn, &info, &sym, RTLD_DL_SYMENT) || !sym || info.dli_saddr != fn) return 0;
  return static_cast<const ElfW(Sym)*>(sym)->st_size;
}

}  // namespace

Expected<std::vector<const sk_kernel_desc*>> KernelRegistry::replicas(const KernelEntry& kernel, int copies) const {
  std::vector<const sk_kernel_desc*> out = {kernel.desc};
  if (copies <= 1) return out;
  const std::string where = "kernel replication of package '" + kernel.package + "' (" + kernel.path + ")";
  if (std::find(paths_.begin(), paths_.end(), kernel.path) == paths_.end())
    return Status::invalid_argument(where + ": the package was not loaded from a file, so it cannot be copied");
  std::lock_guard<std::mutex> lock(replica_mu_);
  std::vector<Replica>& loaded = replicas_[kernel.path];
  namespace fs = std::filesystem;
  while (static_cast<int>(loaded.size()) + 1 < copies) {
    // A private directory per copy: dlopen would hand back the loaded object for the same file,
    // so each copy is a file of its own, removed once mapped.
    std::error_code ec;
    std::string dir_template = (fs::temp_directory_path(ec) / "sk_replica_XXXXXX").string();
    if (ec || !mkdtemp(dir_template.data()))
      return Status::internal(where + ": cannot create a temporary directory for copy " +
                              std::to_string(loaded.size() + 1));
    const fs::path dir = dir_template;
    const fs::path file = dir / fs::path(kernel.path).filename();
    fs::copy_file(kernel.path, file, ec);
    void* handle = ec ? nullptr : dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* err = handle ? nullptr : dlerror();
    const std::string why = ec ? ec.message() : err ? err : "";
    fs::remove_all(dir, ec);
    if (!handle)
      return Status::internal(where + ": cannot load copy " + std::to_string(loaded.size() + 1) + ": " + why);
    auto table_fn = reinterpret_cast<sk_kernel_package_table_fn>(dlsym(handle, SK_KERNEL_PACKAGE_SYMBOL));
    const sk_kernel_package* table = table_fn ? table_fn() : nullptr;
    if (!table) {
      dlclose(handle);
      return Status::internal(where + ": copy " + std::to_string(loaded.size() + 1) + " has no kernel table");
    }
    loaded.push_back({handle, table});
  }
  for (int i = 0; i + 1 < copies; ++i) {
    const sk_kernel_package* table = loaded[i].table;
    const sk_kernel_desc* found = nullptr;
    for (uint32_t k = 0; k < table->num_kernels && !found; ++k)
      if (std::string_view(table->kernels[k].name) == kernel.desc->name) found = &table->kernels[k];
    if (!found)
      return Status::internal(where + ": copy " + std::to_string(i + 1) + " lacks kernel '" + kernel.desc->name + "'");
    out.push_back(found);
  }
  return out;
}

Status KernelRegistry::load_package(const std::string& path) {
  const std::string where = "kernel package '" + path + "'";
  // Compare canonical paths so "./lib/x.so" and a symlink to it count as the same package.
  char resolved[PATH_MAX];
  const std::string canonical = realpath(path.c_str(), resolved) ? std::string(resolved) : path;
  if (std::find(canonical_paths_.begin(), canonical_paths_.end(), canonical) != canonical_paths_.end())
    return Status::invalid_argument(where + ": already loaded");
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    return Status::not_found(where + ": cannot load: " + (err ? err : "unknown dlopen error"));
  }
  dlerror();
  void* sym = dlsym(handle, SK_KERNEL_PACKAGE_SYMBOL);
  if (!sym) {
    dlclose(handle);
    return Status::invalid_argument(where + ": does not export the table symbol '" SK_KERNEL_PACKAGE_SYMBOL
                                            "' (build it with superkernel_add_kernel_package)");
  }
  auto table_fn = reinterpret_cast<sk_kernel_package_table_fn>(sym);
  const sk_kernel_package* table = table_fn();
  Status s = add_package(table, path);
  if (!s) {
    dlclose(handle);
    return s;
  }
  handles_.push_back(handle);
  paths_.push_back(path);
  canonical_paths_.push_back(canonical);
  return Status::ok();
}

Status KernelRegistry::add_package(const sk_kernel_package* table, const std::string& origin) {
  const std::string where = "kernel package '" + origin + "'";
  if (!table) return Status::invalid_argument(where + ": " SK_KERNEL_PACKAGE_SYMBOL "() returned NULL");
  if (table->abi_version != SK_KERNEL_ABI_VERSION)
    return Status::invalid_argument(where + ": built for kernel ABI version " + std::to_string(table->abi_version) +
                                    ", this runtime speaks version " + std::to_string(SK_KERNEL_ABI_VERSION) +
                                    "; rebuild the package");
  const std::string pkg = table->name ? table->name : "";
  if (pkg.empty()) return Status::invalid_argument(where + ": package table has no name");
  if (table->num_kernels > 0 && !table->kernels)
    return Status::invalid_argument(where + ": package '" + pkg + "' lists " + std::to_string(table->num_kernels) +
                                    " kernels but its kernel array is NULL");
  std::map<std::string, uint32_t> seen;  // name -> first index
  for (uint32_t i = 0; i < table->num_kernels; ++i) {
    const sk_kernel_desc& d = table->kernels[i];
    const std::string kname = d.name ? d.name : "";
    const std::string kw = where + ": kernel #" + std::to_string(i) + (kname.empty() ? "" : " '" + kname + "'");
    if (kname.empty()) return Status::invalid_argument(kw + ": null or empty name");
    if (d.abi_version != SK_KERNEL_ABI_VERSION)
      return Status::invalid_argument(kw + ": descriptor ABI version " + std::to_string(d.abi_version) +
                                      " != runtime's " + std::to_string(SK_KERNEL_ABI_VERSION));
    if (!d.run) return Status::invalid_argument(kw + ": null run entry");
    if (d.type < 0 || d.type >= SK_KERNEL_TYPE_COUNT)
      return Status::invalid_argument(kw + ": unknown kernel type " + std::to_string(d.type) +
                                      " (expected SK_KERNEL_CUBE, SK_KERNEL_VECTOR, SK_KERNEL_MIX_1_1 or "
                                      "SK_KERNEL_MIX_1_2)");
    if (d.flags & ~SK_KNOWN_FLAGS)
      return Status::invalid_argument(kw + ": unknown flag bits 0x" + [&] {
        char buf[16];
        std::snprintf(buf, sizeof(buf), "%x", d.flags & ~SK_KNOWN_FLAGS);
        return std::string(buf);
      }());
    if ((d.flags & SK_USES_SYNC_ALL) && d.sync_all_count == 0)
      return Status::invalid_argument(kw + ": SK_USES_SYNC_ALL set but sync_all_count is 0");
    if (!(d.flags & SK_USES_SYNC_ALL) && d.sync_all_count != 0)
      return Status::invalid_argument(kw + ": sync_all_count is " + std::to_string(d.sync_all_count) +
                                      " without SK_USES_SYNC_ALL");
    if ((d.flags & SK_TILING_SINK) && !d.tiling)
      return Status::invalid_argument(kw + ": SK_TILING_SINK set but the tiling entry is null");
    if ((d.flags & SK_WORKSPACE_PER_CORE) && !d.workspace_size)
      return Status::invalid_argument(kw + ": SK_WORKSPACE_PER_CORE set but the workspace_size entry is null");
    if (auto [it, fresh] = seen.emplace(kname, i); !fresh)
      return Status::invalid_argument(kw + ": duplicate kernel name inside the package (also kernel #" +
                                      std::to_string(it->second) + ")");
    auto it = kernels_.find(kname);
    if (it != kernels_.end())
      return Status::invalid_argument(kw + ": duplicate kernel name, already provided by package '" +
                                      it->second.package + "' (" + it->second.path + ")");
  }
  for (uint32_t i = 0; i < table->num_kernels; ++i) {
    const sk_kernel_desc& d = table->kernels[i];
    kernels_.emplace(d.name, KernelEntry{&d, pkg, origin, symbol_bytes(reinterpret_cast<const void*>(d.run))});
  }
  return Status::ok();
}

const KernelEntry* KernelRegistry::find(std::string_view name) const {
  auto it = kernels_.find(std::string(name));
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::kernel_names() const {
  std::vector<std::string> names;
  names.reserve(kernels_.size());
  for (const auto& [name, entry] : kernels_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> KernelRegistry::package_paths() const { return paths_; }

std::string builtin_package_path() {
  if (const char* env = std::getenv("SK_BUILTIN_KERNELS"); env && *env) return env;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&builtin_package_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    std::string dir = slash == std::string::npos ? "." : self.substr(0, slash);
    return dir + "/libsk_kernels_builtin.so";
  }
  return "libsk_kernels_builtin.so";
}

}  // namespace sk
