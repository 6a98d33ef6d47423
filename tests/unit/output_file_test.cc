// sk::OutputFile and sk::write_file (superkernel/output_file.h): a file is replaced whole or not
// at all, and every failure (a full device, a directory nobody may write, a bad path) is an error
// naming the path; the writers built on it (the data dump, traces, safetensors) report the same.
#include "superkernel/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"
#include "superkernel/weights.h"

namespace sk {
namespace {

namespace fs = std::filesystem;

// A directory no process may create files in, root included (sysfs), or, where it is missing, a
// directory made read-only (enough for a user other than root).
std::string read_only_dir() {
  if (fs::is_directory("/sys")) return "/sys";
  const std::string dir = testing::TempDir() + "/sk_read_only";
  fs::create_directories(dir);
  chmod(dir.c_str(), 0555);
  return dir;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every name in `dir` that starts with `prefix`.
int count_with_prefix(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/sk_output_file_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(OutputFileTest, ReplacesAFileWholeAndLeavesNoTemporaryBehind) {
  const std::string path = dir_ + "/out.json";
  ASSERT_TRUE(write_file(path, "old contents, longer than the new ones"));
  chmod(path.c_str(), 0640);
  ASSERT_TRUE(write_file(path, "new"));
  EXPECT_EQ(slurp(path), "new");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "the replaced file's permissions are kept";
  EXPECT_EQ(count_with_prefix(dir_, "out.json.tmp"), 0);
}

TEST_F(OutputFileTest, UncommittedOrFailedWritesLeaveTheOldFileAsItWas) {
  const std::string path = dir_ + "/model.bin";
  ASSERT_TRUE(write_file(path, "old"));
  {
    auto f = OutputFile::open(path);
    ASSERT_TRUE(f) << f.status().to_string();
    ASSERT_TRUE(f->write("half of the new"));
    EXPECT_EQ(count_with_prefix(dir_, "model.bin.tmp"), 1) << "written beside the file, under another name";
  }  // dropped without commit()
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(count_with_prefix(dir_, "model.bin.tmp"), 0);
}

TEST_F(OutputFileTest, FollowsASymbolicLinkAndReplacesWhatItNames) {
  const std::string target = dir_ + "/target.txt", link = dir_ + "/link.txt";
  ASSERT_TRUE(write_file(target, "a"));
  fs::create_symlink(target, link);
  ASSERT_TRUE(write_file(link, "b"));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(target), "b");
}

TEST_F(OutputFileTest, AFullDeviceIsAnErrorNamingThePath) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  Status s = write_file("/dev/full", std::string(1 << 16, 'x'));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("cannot write '/dev/full'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.message();
  // A device is written in place: /dev/null takes anything.
  EXPECT_TRUE(write_file("/dev/null", "x"));
  EXPECT_TRUE(fs::is_character_file("/dev/full")) << "the device was not replaced";
}

TEST_F(OutputFileTest, ADirectoryThatCannotBeWrittenIsAnErrorNamingThePath) {
  const std::string path = read_only_dir() + "/sk_out.json";
  if (auto probe = std::ofstream(path); probe) {
    fs::remove(path);
    GTEST_SKIP() << read_only_dir() << " can be written here";
  }
  auto f = OutputFile::open(path);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("cannot write '" + path + "'"), std::string::npos) << f.status().message();
  Status s = write_file(dir_ + "/no/such/dir/x", "x");
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  s = write_file(dir_, "x");
  EXPECT_NE(s.message().find("it is a directory"), std::string::npos) << s.message();
  EXPECT_FALSE(write_file("", "x"));
}

TEST_F(OutputFileTest, WritersReportAFullDeviceAndAReadOnlyDirectory) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string ro = read_only_dir();
  // Checkpoints.
  std::vector<float> w(16, 1.0f);
  std::vector<SafetensorsEntry> entries = {{"w", DType::kF32, {4, 4}, w.data(), w.size() * 4}};
  for (const std::string& path : {std::string("/dev/full"), ro + "/w.safetensors"}) {
    Status s = write_safetensors(path, entries);
    ASSERT_FALSE(s) << path;
    EXPECT_NE(s.message().find("'" + path + "'"), std::string::npos) << s.message();
  }
  // The data dump (a directory nobody can write) and traces.
  Graph g("dumped");
  Tensor x = g.input("x", DType::kF32, {1, 8});
  g.output(add(g, x, x), "y");
  auto rt = Runtime::create();
  ASSERT_TRUE(rt) << rt.status().to_string();
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kGraph);
  o.dump = true;
  o.dump_dir = ro;
  auto exe = (*rt)->compile(g, o);
  ASSERT_TRUE(exe) << exe.status().to_string();
  ASSERT_TRUE((*exe)->set_input("x", std::vector<float>(8, 1.0f)));
  Status s = (*exe)->run();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("option 'dump_dir'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot write '" + ro + "/"), std::string::npos) << s.message();
  // And a dump that can be written is whole: every tensor's file and the index naming them. The
  // same run is traced, and its trace cannot go to a full device or a read-only directory.
  o.dump_dir = dir_;
  o.super_kernel_debug_options.debug_op_exec_trace = true;
  auto ok = (*rt)->compile(g, o);
  ASSERT_TRUE(ok);
  ASSERT_TRUE((*ok)->set_input("x", std::vector<float>(8, 1.0f)));
  ASSERT_TRUE((*ok)->run());
  const std::string index = slurp(dir_ + "/index.txt");
  EXPECT_NE(index.find("0.bin"), std::string::npos) << index;
  EXPECT_EQ(count_with_prefix(dir_, "index.txt.tmp"), 0);
  for (const std::string& path : {std::string("/dev/full"), ro + "/trace.json"}) {
    s = (*ok)->write_trace(path);
    ASSERT_FALSE(s) << path;
    EXPECT_NE(s.message().find("trace file: cannot write '" + path + "'"), std::string::npos) << s.message();
  }
  EXPECT_TRUE((*ok)->write_trace(dir_ + "/trace.json"));
}

}  // namespace
}  // namespace sk
