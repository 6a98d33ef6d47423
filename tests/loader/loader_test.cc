// The kernel-package loader against deliberately broken packages (tests/loader/broken/*.c).
//
// Every failure must be a Status (never an abort) whose message names the package file and,
// when one kernel is at fault, that kernel's name or index; and a failed load must register
// nothing of the package. Both are checked through KernelRegistry and through sk::Runtime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "packages/kernel_registry.h"
#include "superkernel/runtime.h"
#include "superkernel/status.h"

namespace sk {
namespace {

struct BrokenCase {
  const char* label;  // gtest parameter name
  std::string path;
  StatusCode code;
  // Substrings the message must contain besides the path: the kernel's name or index, and the
  // words that say what is wrong.
  std::vector<std::string> needles;
  // Every kernel the package declares (valid or not): none may be registered after the failure.
  std::vector<std::string> kernels;
};

// Keeps gtest from dumping the struct's bytes when a case fails.
void PrintTo(const BrokenCase& c, std::ostream* os) { *os << c.label << " (" << c.path << ")"; }

std::vector<BrokenCase> broken_cases() {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  return {
      {"MissingSymbol",
       SK_PKG_MISSING_SYMBOL,
       kInvalid,
       {"sk_kernel_package_table", "does not export"},
       {"missing_symbol.ok.f32"}},
      {"NullTable", SK_PKG_NULL_TABLE, kInvalid, {"sk_kernel_package_table()", "returned NULL"}, {}},
      {"PackageAbiMismatch",
       SK_PKG_PACKAGE_ABI_MISMATCH,
       kInvalid,
       {"ABI version " + std::to_string(SK_KERNEL_ABI_VERSION + 1u), "rebuild"},
       {"package_abi.ok.f32"}},
      {"KernelAbiMismatch",
       SK_PKG_KERNEL_ABI_MISMATCH,
       kInvalid,
       {"kernel #1", "'kernel_abi.bad.f32'", "ABI version " + std::to_string(SK_KERNEL_ABI_VERSION + 1u)},
       {"kernel_abi.ok.f32", "kernel_abi.bad.f32"}},
      {"DuplicateInPackage",
       SK_PKG_DUPLICATE_IN_PACKAGE,
       kInvalid,
       {"kernel #2", "'duplicate.twice.f32'", "duplicate kernel name"},
       {"duplicate.ok.f32", "duplicate.twice.f32"}},
      {"NullRun",
       SK_PKG_NULL_RUN,
       kInvalid,
       {"kernel #1", "'null_run.bad.f32'", "null run entry"},
       {"null_run.ok.f32", "null_run.bad.f32"}},
      {"NullName", SK_PKG_NULL_NAME, kInvalid, {"kernel #1", "null or empty name"}, {"null_name.ok.f32"}},
      {"EmptyName", SK_PKG_EMPTY_NAME, kInvalid, {"kernel #1", "null or empty name"}, {"empty_name.ok.f32", ""}},
      {"UnknownType",
       SK_PKG_UNKNOWN_TYPE,
       kInvalid,
       {"kernel #1", "'unknown_type.bad.f32'", "unknown kernel type 7"},
       {"unknown_type.ok.f32", "unknown_type.bad.f32"}},
      {"UnknownFlags",
       SK_PKG_UNKNOWN_FLAGS,
       kInvalid,
       {"kernel #1", "'unknown_flags.bad.f32'", "unknown flag bits 0x40"},
       {"unknown_flags.ok.f32", "unknown_flags.bad.f32"}},
      {"SyncAllCountZero",
       SK_PKG_SYNC_ALL_ZERO,
       kInvalid,
       {"kernel #1", "'sync_all_zero.bad.f32'", "SK_USES_SYNC_ALL", "sync_all_count is 0"},
       {"sync_all_zero.ok.f32", "sync_all_zero.bad.f32"}},
      {"SyncCountWithoutFlag",
       SK_PKG_SYNC_COUNT_WITHOUT_FLAG,
       kInvalid,
       {"kernel #1", "'sync_count.bad.f32'", "sync_all_count is 2", "without SK_USES_SYNC_ALL"},
       {"sync_count.ok.f32", "sync_count.bad.f32"}},
      {"TilingSinkWithoutTiling",
       SK_PKG_TILING_SINK_WITHOUT_TILING,
       kInvalid,
       {"kernel #1", "'tiling_sink.bad.f32'", "SK_TILING_SINK", "tiling entry is null"},
       {"tiling_sink.ok.f32", "tiling_sink.bad.f32"}},
      {"PerCoreWorkspaceWithoutSize",
       SK_PKG_PER_CORE_WORKSPACE_WITHOUT_SIZE,
       kInvalid,
       {"kernel #1", "'per_core_ws.bad.f32'", "SK_WORKSPACE_PER_CORE", "workspace_size entry is null"},
       {"per_core_ws.ok.f32", "per_core_ws.bad.f32"}},
      {"NamelessPackage", SK_PKG_NAMELESS_PACKAGE, kInvalid, {"has no name"}, {"nameless.ok.f32"}},
      {"NullKernelArray", SK_PKG_NULL_KERNEL_ARRAY, kInvalid, {"3 kernels", "kernel array is NULL"}, {}},
      {"MissingFile", SK_PKG_MISSING_FILE, StatusCode::kNotFound, {"cannot load"}, {}},
  };
}

// Checks what every loader error must satisfy; `context` says which entry point produced it.
void expect_load_error(const Status& s, const BrokenCase& c, const std::string& context) {
  SCOPED_TRACE(context);
  ASSERT_FALSE(s.is_ok()) << "loading " << c.path << " succeeded";
  EXPECT_EQ(s.code(), c.code) << s.to_string();
  EXPECT_NE(s.message().find(c.path), std::string::npos) << "message does not name the file: " << s.to_string();
  for (const std::string& needle : c.needles) {
    EXPECT_NE(s.message().find(needle), std::string::npos) << "missing '" << needle << "' in: " << s.to_string();
  }
}

void expect_none_registered(const KernelRegistry& reg, const BrokenCase& c) {
  for (const std::string& k : c.kernels) EXPECT_EQ(reg.find(k), nullptr) << "kernel '" << k << "' was registered";
  const std::vector<std::string> paths = reg.package_paths();
  EXPECT_EQ(std::find(paths.begin(), paths.end(), c.path), paths.end()) << "failed package listed as loaded";
}

// Small and unpinned: these runtimes only load packages, and tests may run in parallel.
RuntimeOptions packages_only(std::vector<std::string> packages) {
  RuntimeOptions opts;
  opts.num_cores = 1;
  opts.pin_threads = false;
  opts.allow_oversubscribe = true;
  opts.load_builtin_kernels = false;
  opts.kernel_packages = std::move(packages);
  return opts;
}

class BrokenPackage : public testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPackage, RegistryRejectsItAndRegistersNothing) {
  const BrokenCase& c = GetParam();
  KernelRegistry reg;
  expect_load_error(reg.load_package(c.path), c, "KernelRegistry::load_package");
  EXPECT_TRUE(reg.kernel_names().empty());
  expect_none_registered(reg, c);
  // A failed load must leave no trace: trying again gives the same error, not "already loaded".
  Status again = reg.load_package(c.path);
  expect_load_error(again, c, "KernelRegistry::load_package, second attempt");
  EXPECT_EQ(again.message().find("already loaded"), std::string::npos) << again.to_string();
}

TEST_P(BrokenPackage, RegistryKeepsEarlierPackagesIntact) {
  const BrokenCase& c = GetParam();
  KernelRegistry reg;
  ASSERT_TRUE(reg.load_package(SK_PKG_CROSS_FIRST).is_ok());
  const std::vector<std::string> before = reg.kernel_names();
  expect_load_error(reg.load_package(c.path), c, "KernelRegistry::load_package after a good package");
  EXPECT_EQ(reg.kernel_names(), before);
  EXPECT_EQ(reg.package_paths(), std::vector<std::string>{SK_PKG_CROSS_FIRST});
  expect_none_registered(reg, c);
  ASSERT_NE(reg.find("cross.shared.f32"), nullptr);
  EXPECT_EQ(reg.find("cross.shared.f32")->package, "loader_cross_first");
}

TEST_P(BrokenPackage, RuntimeCreateReportsIt) {
  const BrokenCase& c = GetParam();
  auto rt = Runtime::create(packages_only({c.path}));
  expect_load_error(rt.status(), c, "Runtime::create with RuntimeOptions::kernel_packages");
}

TEST_P(BrokenPackage, RuntimeLoadKernelPackageReportsIt) {
  const BrokenCase& c = GetParam();
  auto rt = Runtime::create(packages_only({SK_PKG_CROSS_FIRST}));
  ASSERT_TRUE(rt) << rt.status().to_string();
  const std::vector<std::string> before = (*rt)->kernel_names();
  expect_load_error((*rt)->load_kernel_package(c.path), c, "Runtime::load_kernel_package");
  EXPECT_EQ((*rt)->kernel_names(), before);
}

INSTANTIATE_TEST_SUITE_P(Loader, BrokenPackage, testing::ValuesIn(broken_cases()),
                         [](const testing::TestParamInfo<BrokenCase>& p) { return std::string(p.param.label); });

// The same kernel name in two packages: the second load fails, names both the kernel and the
// package that already provides it, and registers neither of its kernels.
TEST(LoaderCrossPackage, SecondPackageWithSameKernelNameIsRejected) {
  KernelRegistry reg;
  ASSERT_TRUE(reg.load_package(SK_PKG_CROSS_FIRST).is_ok());
  Status s = reg.load_package(SK_PKG_CROSS_SECOND);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const std::string& needle :
       {std::string(SK_PKG_CROSS_SECOND), std::string("kernel #1"), std::string("'cross.shared.f32'"),
        std::string("already provided by package 'loader_cross_first'"), std::string(SK_PKG_CROSS_FIRST)}) {
    EXPECT_NE(s.message().find(needle), std::string::npos) << "missing '" << needle << "' in: " << s.to_string();
  }
  EXPECT_EQ(reg.find("cross.second_only.f32"), nullptr);
  ASSERT_NE(reg.find("cross.shared.f32"), nullptr);
  EXPECT_EQ(reg.find("cross.shared.f32")->package, "loader_cross_first");
  EXPECT_EQ(reg.find("cross.shared.f32")->path, SK_PKG_CROSS_FIRST);
  EXPECT_EQ(reg.kernel_names(), (std::vector<std::string>{"cross.first_only.f32", "cross.shared.f32"}));
  EXPECT_EQ(reg.package_paths(), std::vector<std::string>{SK_PKG_CROSS_FIRST});
}

TEST(LoaderCrossPackage, EachPackageLoadsOnItsOwn) {
  // Proves the conflict above comes from the pair, not from either file.
  for (const char* path : {SK_PKG_CROSS_FIRST, SK_PKG_CROSS_SECOND}) {
    KernelRegistry reg;
    Status s = reg.load_package(path);
    EXPECT_TRUE(s.is_ok()) << path << ": " << s.to_string();
    EXPECT_EQ(reg.kernel_names().size(), 2u);
  }
}

TEST(LoaderCrossPackage, RuntimeCreateNamesTheFirstPackage) {
  auto rt = Runtime::create(packages_only({SK_PKG_CROSS_FIRST, SK_PKG_CROSS_SECOND}));
  ASSERT_FALSE(rt);
  const std::string m = rt.status().message();
  EXPECT_NE(m.find(SK_PKG_CROSS_SECOND), std::string::npos) << m;
  EXPECT_NE(m.find("'cross.shared.f32'"), std::string::npos) << m;
  EXPECT_NE(m.find("'loader_cross_first'"), std::string::npos) << m;
}

TEST(LoaderCrossPackage, RuntimeLoadKernelPackageKeepsTheFirst) {
  auto rt = Runtime::create(packages_only({SK_PKG_CROSS_FIRST}));
  ASSERT_TRUE(rt) << rt.status().to_string();
  Status s = (*rt)->load_kernel_package(SK_PKG_CROSS_SECOND);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'loader_cross_first'"), std::string::npos) << s.to_string();
  EXPECT_EQ((*rt)->kernel_names(), (std::vector<std::string>{"cross.first_only.f32", "cross.shared.f32"}));
}

TEST(Loader, LoadingTheSameFileTwiceIsAnError) {
  KernelRegistry reg;
  ASSERT_TRUE(reg.load_package(SK_PKG_CROSS_FIRST).is_ok());
  Status s = reg.load_package(SK_PKG_CROSS_FIRST);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(SK_PKG_CROSS_FIRST), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("already loaded"), std::string::npos) << s.to_string();
  EXPECT_EQ(reg.kernel_names().size(), 2u);
}

// The same file by another name (a symlink, a "dir/./file" path) is the same package: the
// registry says so instead of reporting every kernel as a duplicate.
TEST(Loader, TheSameFileByAnotherPathIsAlreadyLoaded) {
  const std::filesystem::path original = SK_PKG_CROSS_FIRST;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sk_loader_alias_" + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::create_directories(dir);
  const std::filesystem::path link = dir / "alias.so";
  std::filesystem::remove(link);
  std::filesystem::create_symlink(original, link);
  const std::string dotted = (original.parent_path() / "." / original.filename()).string();
  for (const std::string& other : {link.string(), dotted}) {
    KernelRegistry reg;
    ASSERT_TRUE(reg.load_package(SK_PKG_CROSS_FIRST).is_ok());
    Status s = reg.load_package(other);
    ASSERT_FALSE(s.is_ok()) << other;
    EXPECT_NE(s.message().find(other), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("already loaded"), std::string::npos) << s.to_string();
    EXPECT_EQ(reg.kernel_names().size(), 2u);
  }
  std::filesystem::remove_all(dir);
}

TEST(Loader, GoodPackageRecordsNameAndPath) {
  KernelRegistry reg;
  ASSERT_TRUE(reg.load_package(SK_PKG_CROSS_FIRST).is_ok());
  const KernelEntry* k = reg.find("cross.first_only.f32");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->package, "loader_cross_first");
  EXPECT_EQ(k->path, SK_PKG_CROSS_FIRST);
  ASSERT_NE(k->desc, nullptr);
  EXPECT_STREQ(k->desc->name, "cross.first_only.f32");
  EXPECT_EQ(k->desc->type, SK_KERNEL_VECTOR);
}

TEST(Loader, RuntimeWithoutPackagesHasNoKernels) {
  auto rt = Runtime::create(packages_only({}));
  ASSERT_TRUE(rt) << rt.status().to_string();
  EXPECT_TRUE((*rt)->kernel_names().empty());
}

}  // namespace
}  // namespace sk
