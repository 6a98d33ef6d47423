// Fuzz target: kernel-package tables. A fake package table is built from the fuzz bytes and
// registered through KernelRegistry::add_package, the validation load_package runs on every
// dlopened table. Invariants: no crash; all or nothing (a rejected table registers no kernel and
// the error names the package origin); an accepted table satisfies the documented descriptor
// rules and every kernel is found with its own descriptor.
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "packages/kernel_registry.h"

namespace {

int32_t fake_run(const sk_kernel_args*, const sk_core_ctx*) { return 0; }
int32_t fake_tiling(const sk_kernel_args*, void*, uint32_t, uint32_t* size) {
  *size = 0;
  return 0;
}
uint64_t fake_workspace(const sk_kernel_args*) { return 0; }
int32_t fake_access(const sk_kernel_args*, int32_t, int32_t, sk_access_range*, int32_t) { return 0; }

// Names that collide with each other and with the resident package.
const char* const kNames[] = {"k.f32", "k.bf16", "resident.f32", "", "add.f32", "k.f32"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sk::fuzz::FuzzInput in(data, size);
  sk::KernelRegistry registry;

  // A package already loaded, so cross-package duplicates are reachable.
  static const sk_kernel_desc kResident[] = {{SK_KERNEL_ABI_VERSION, "resident.f32", SK_KERNEL_VECTOR, SK_FUSIBLE,
                                              fake_run, nullptr, nullptr, nullptr, nullptr, 0}};
  static const sk_kernel_package kResidentPackage = {SK_KERNEL_ABI_VERSION, "resident", 1, kResident};
  sk::Status resident = registry.add_package(&kResidentPackage, "resident.so");
  SK_FUZZ_CHECK(resident.is_ok(), "the resident package is valid: " + resident.message());
  const std::vector<std::string> before = registry.kernel_names();

  std::deque<std::string> strings;  // stable storage for the names the table points at
  auto name = [&]() -> const char* {
    switch (in.pick(0, 7)) {
      case 0:
        return nullptr;
      case 1:
        return strings.emplace_back(in.text(24)).c_str();
      default:
        return in.one_of(kNames);
    }
  };
  const bool null_table = in.pick(0, 31) == 0;
  sk_kernel_package table{};
  table.abi_version = in.pick(0, 15) == 0 ? in.u32() : SK_KERNEL_ABI_VERSION;
  table.name = in.pick(0, 15) == 0 ? name() : "fuzzed";
  table.num_kernels = static_cast<uint32_t>(in.pick(0, 8));
  std::vector<sk_kernel_desc> kernels(table.num_kernels);
  for (sk_kernel_desc& d : kernels) {
    d.abi_version = in.pick(0, 15) == 0 ? in.u32() : SK_KERNEL_ABI_VERSION;
    d.name = name();
    d.type = in.pick(0, 7) == 0 ? static_cast<int32_t>(in.u32()) : in.pick(0, SK_KERNEL_TYPE_COUNT - 1);
    d.flags = in.pick(0, 7) == 0 ? in.u32() : in.byte() & SK_KNOWN_FLAGS;
    const uint8_t present = in.byte();
    d.run = (present & 1) || (present & 0x80) ? fake_run : nullptr;
    d.prologue = present & 2 ? fake_run : nullptr;
    d.tiling = present & 4 ? fake_tiling : nullptr;
    d.workspace_size = present & 8 ? fake_workspace : nullptr;
    d.access = present & 16 ? fake_access : nullptr;
    d.sync_all_count = in.pick(0, 3) == 0 ? in.u32() : static_cast<uint32_t>(in.pick(0, 2));
  }
  table.kernels = table.num_kernels > 0 && in.pick(0, 15) == 0 ? nullptr : kernels.data();

  sk::Status s = registry.add_package(null_table ? nullptr : &table, "fuzz.so");
  if (!s) {
    SK_FUZZ_CHECK(s.message().find("kernel package 'fuzz.so'") == 0, "error does not name the origin: " + s.message());
    SK_FUZZ_CHECK(registry.kernel_names() == before, "a rejected package registered kernels: " + s.message());
    return 0;
  }
  SK_FUZZ_CHECK(!null_table && table.abi_version == SK_KERNEL_ABI_VERSION, "accepted a bad package header");
  SK_FUZZ_CHECK(table.name && *table.name, "accepted a nameless package");
  SK_FUZZ_CHECK(registry.kernel_names().size() == before.size() + table.num_kernels, "kernel count mismatch");
  for (const sk_kernel_desc& d : kernels) {
    SK_FUZZ_CHECK(d.name && *d.name, "accepted a nameless kernel");
    const std::string kname = d.name;
    SK_FUZZ_CHECK(d.abi_version == SK_KERNEL_ABI_VERSION && d.run, "accepted a bad descriptor: " + kname);
    SK_FUZZ_CHECK(d.type >= 0 && d.type < SK_KERNEL_TYPE_COUNT, "accepted an unknown type: " + kname);
    SK_FUZZ_CHECK((d.flags & ~SK_KNOWN_FLAGS) == 0, "accepted unknown flags: " + kname);
    SK_FUZZ_CHECK(((d.flags & SK_USES_SYNC_ALL) != 0) == (d.sync_all_count != 0), "sync_all mismatch: " + kname);
    SK_FUZZ_CHECK(!(d.flags & SK_TILING_SINK) || d.tiling, "tiling sink without tiling: " + kname);
    SK_FUZZ_CHECK(!(d.flags & SK_WORKSPACE_PER_CORE) || d.workspace_size, "per-core workspace without size");
    const sk::KernelEntry* e = registry.find(kname);
    SK_FUZZ_CHECK(e && e->desc == &d && e->package == table.name, "kernel not registered as given: " + kname);
  }
  return 0;
}
