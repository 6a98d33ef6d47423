// The built-in kernel package as tests see it through the loader: its kernel names, and its ISA
// level forced in every loaded copy (the runtime's, and the copies kernel replication loads).
//
// The package's level (src/kernels/cpu_isa.h) is a variable of each loaded copy, and
// `kernel_replicas` loads private copies of the file, so forcing it through one handle would
// leave the replicas at the CPU's level. Force it after compiling and before running:
//
//   for (int level : sk::testing::isa_levels()) {
//     auto exe = rt->compile(g, options);
//     sk::testing::force_isa(level);   // every copy loaded so far
//     (*exe)->run();
//   }
//   sk::testing::force_isa(-1);         // back to the default (the CPU's, or SK_ISA's)
#ifndef SUPERKERNEL_TESTS_COMMON_BUILTIN_PACKAGE_H_
#define SUPERKERNEL_TESTS_COMMON_BUILTIN_PACKAGE_H_

#include <dlfcn.h>
#include <link.h>
#include <superkernel/kernel_abi.h>

#include <cstring>
#include <string>
#include <vector>

namespace sk::testing {

namespace detail {

using ForceIsaFn = int32_t (*)(int32_t);

// Every loaded object that defines `symbol` itself (not through a dependency), once each.
inline std::vector<void*> loaded_definitions(const char* symbol) {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
          static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
  std::vector<void*> found;
  for (const std::string& name : names) {
    // RTLD_NOLOAD finds the loaded object by name without touching the file system (a replica's
    // file is removed once mapped).
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* sym = dlsym(handle, symbol);
    Dl_info info;
    if (sym != nullptr && dladdr(sym, &info) && info.dli_fname != nullptr && name == info.dli_fname) {
      bool seen = false;
      for (void* f : found) seen |= f == sym;
      if (!seen) found.push_back(sym);
    }
    dlclose(handle);
  }
  return found;
}

}  // namespace detail

// The highest level the package knows (src/kernels/cpu_isa.h).
inline constexpr int kMaxIsaLevel = 5;

// Forces the built-in kernels' ISA level (0 scalar, 1 avx2, 2 avx512, 3 avx512_vnni,
// 4 avx512_bf16, 5 amx; capped at the CPU's) in every loaded copy of the package; -1 restores the
// default. Returns the level in effect (the same in every copy), or -1 when no copy is loaded.
inline int force_isa(int level) {
  int in_effect = -1;
  for (void* f : detail::loaded_definitions("sk_kernels_builtin_force_isa"))
    in_effect = reinterpret_cast<detail::ForceIsaFn>(f)(level);
  return in_effect;
}

// The ISA levels this CPU runs, lowest first (a runtime must have loaded the package). Under
// SK_ISA the default level is SK_ISA's, and the levels above it are still reachable by forcing.
inline std::vector<int> isa_levels() {
  std::vector<int> levels;
  for (int level = 0; level <= kMaxIsaLevel; ++level)
    if (force_isa(level) == level) levels.push_back(level);
  force_isa(-1);
  return levels;
}

inline const char* isa_name(int level) {
  static const char* const kNames[] = {"scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx"};
  return level >= 0 && level <= kMaxIsaLevel ? kNames[level] : "default";
}

// Names of the built-in package's kernels (a runtime must have loaded it).
inline std::vector<std::string> builtin_kernel_names() {
  std::vector<std::string> names;
  const std::vector<void*> tables = detail::loaded_definitions(SK_KERNEL_PACKAGE_SYMBOL);
  for (void* f : tables) {
    const sk_kernel_package* pkg = reinterpret_cast<sk_kernel_package_table_fn>(f)();
    if (pkg == nullptr || std::strcmp(pkg->name, "builtin") != 0) continue;
    for (uint32_t i = 0; i < pkg->num_kernels; ++i) names.push_back(pkg->kernels[i].name);
    break;
  }
  return names;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_BUILTIN_PACKAGE_H_
