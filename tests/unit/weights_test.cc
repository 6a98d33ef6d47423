// Weights: safetensors files (round trip, mapping without copies, every header and file error),
// checkpoint directories, random and checkpoint weight sources, W8A8 quantisation at load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/test_runtime.h"
#include "kernels/manual_args.h"
#include "kernels/reference/reference.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"
#include "superkernel/weights.h"
#include "util/half.h"

namespace sk {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() /
            ("sk_weights_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  void write_text(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
  }
  // A safetensors file from a raw header and `data_bytes` bytes of data.
  void write_raw(const std::string& name, const std::string& header, size_t data_bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data_bytes, '\0');
  }
  std::string read_bytes(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
};

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(f32_to_bf16(f));
  return out;
}

template <class T>
SafetensorsEntry entry(const std::string& name, DType dtype, Shape shape, const std::vector<T>& values) {
  return {name, dtype, std::move(shape), values.data(), values.size() * sizeof(T)};
}

void expect_error(const Status& s, StatusCode code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const std::string& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
}

// ---- safetensors ---------------------------------------------------------------------------

TEST_F(WeightsTest, SafetensorsRoundTrip) {
  const std::vector<float> a = testing::random_floats(6, 1);
  const std::vector<uint16_t> b = to_bf16(testing::random_floats(5, 2));
  const std::vector<int8_t> c = {-128, -1, 0, 1, 127};
  const std::vector<int32_t> d = {7, -7, 1 << 30};
  const std::vector<int64_t> e = {int64_t{1} << 40};
  ASSERT_TRUE(write_safetensors(path("t.safetensors"),
                                {entry("c.i8", DType::kI8, {5}, c),
                                 entry("a", DType::kF32, {2, 3}, a),
                                 entry("b", DType::kBF16, {5}, b),
                                 entry("d", DType::kI32, {3}, d),
                                 entry("e", DType::kI64, {1, 1}, e),
                                 {"empty", DType::kF32, {0, 4}, nullptr, 0}},
                                {{"format", "pt"}, {"quote\"d", "x\ny"}})
                  .is_ok());
  auto file = SafetensorsFile::open(path("t.safetensors"));
  ASSERT_TRUE(file) << file.status().to_string();
  EXPECT_EQ((*file)->tensors().size(), 6u);
  auto check = [&](const std::string& name, DType dtype, const Shape& shape, const void* data, size_t bytes) {
    const SafetensorsTensor* t = (*file)->find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, dtype) << name;
    EXPECT_EQ(t->shape, shape) << name;
    ASSERT_EQ(t->bytes, bytes) << name;
    if (bytes) {
      EXPECT_EQ(std::memcmp(t->data, data, bytes), 0) << name;
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % dtype_size(dtype), 0u) << name;
  };
  check("a", DType::kF32, {2, 3}, a.data(), 24);
  check("b", DType::kBF16, {5}, b.data(), 10);
  check("c.i8", DType::kI8, {5}, c.data(), 5);
  check("d", DType::kI32, {3}, d.data(), 12);
  check("e", DType::kI64, {1, 1}, e.data(), 8);
  check("empty", DType::kF32, {0, 4}, nullptr, 0);
  EXPECT_EQ((*file)->find("missing"), nullptr);
  const std::vector<std::pair<std::string, std::string>> meta = {{"format", "pt"}, {"quote\"d", "x\ny"}};
  EXPECT_EQ((*file)->metadata(), meta);
}

// The tensor data points into a read-only mapping of the file itself.
TEST_F(WeightsTest, SafetensorsDataIsMappedNotCopied) {
  const std::vector<float> a(4096, 1.5f);
  ASSERT_TRUE(write_safetensors(path("m.safetensors"), {entry("a", DType::kF32, {4096}, a)}).is_ok());
  auto file = SafetensorsFile::open(path("m.safetensors"));
  ASSERT_TRUE(file);
  const auto address = reinterpret_cast<uintptr_t>((*file)->find("a")->data);
  std::ifstream maps("/proc/self/maps");
  std::string line, mapped_file;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, pathname;
    fields >> range >> perms >> offset >> dev >> inode >> pathname;
    const uintptr_t lo = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (address >= lo && address < hi) {
      mapped_file = pathname;
      EXPECT_EQ(perms.substr(0, 2), "r-") << line;
    }
  }
  EXPECT_EQ(fs::weakly_canonical(mapped_file), fs::weakly_canonical(path("m.safetensors")));
}

TEST_F(WeightsTest, TruncatedFilesNameTheFileAndTheTensor) {
  const std::vector<float> a(8, 1.0f), b(8, 2.0f);
  ASSERT_TRUE(
      write_safetensors(path("full.safetensors"), {entry("a", DType::kF32, {8}, a), entry("b", DType::kF32, {8}, b)})
          .is_ok());
  const std::string full = read_bytes("full.safetensors");
  write_text("cut.safetensors", full.substr(0, full.size() - 4));
  expect_error(SafetensorsFile::open(path("cut.safetensors")).status(), StatusCode::kInvalidArgument,
               {path("cut.safetensors"), "truncated", "tensor 'b'"});
  write_text("header_cut.safetensors", full.substr(0, 20));
  expect_error(SafetensorsFile::open(path("header_cut.safetensors")).status(), StatusCode::kInvalidArgument,
               {path("header_cut.safetensors"), "truncated", "header"});
  write_text("tiny.safetensors", "abc");
  expect_error(SafetensorsFile::open(path("tiny.safetensors")).status(), StatusCode::kInvalidArgument,
               {path("tiny.safetensors"), "truncated"});
  expect_error(SafetensorsFile::open(path("absent.safetensors")).status(), StatusCode::kNotFound,
               {path("absent.safetensors")});
}

TEST_F(WeightsTest, BadHeadersNameTheFileAndTheTensor) {
  struct Case {
    const char* what;
    std::string header;
    size_t data;
    StatusCode code;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {"bad json", R"({"a": {"dtype": "F32",)", 0, StatusCode::kInvalidArgument, {"bad header", ":1:"}},
      {"not an object", R"([1, 2])", 0, StatusCode::kInvalidArgument, {"bad header", "an array"}},
      {"duplicate", R"({"a": {}, "a": {}})", 0, StatusCode::kInvalidArgument, {"duplicate key 'a'"}},
      {"unknown dtype",
       R"({"a": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}})",
       8,
       StatusCode::kInvalidArgument,
       {"tensor 'a'", "unknown dtype 'Q7'"}},
      {"unsupported dtype",
       R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})",
       8,
       StatusCode::kUnimplemented,
       {"tensor 'a'", "F64"}},
      {"out of range",
       R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}})",
       20,
       StatusCode::kInvalidArgument,
       {"tensor 'a'", "ends at data byte 32", "20 data bytes"}},
      {"overlap",
       R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
       24,
       StatusCode::kInvalidArgument,
       {"tensor 'b'", "overlaps tensor 'a'"}},
      {"size vs shape",
       R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})",
       16,
       StatusCode::kInvalidArgument,
       {"tensor 'a'", "needs 12"}},
      {"reversed offsets",
       R"({"a": {"dtype": "I8", "shape": [0], "data_offsets": [4, 2]}})",
       4,
       StatusCode::kInvalidArgument,
       {"tensor 'a'", "end before"}},
      {"negative shape",
       R"({"a": {"dtype": "I8", "shape": [-1], "data_offsets": [0, 0]}})",
       0,
       StatusCode::kInvalidArgument,
       {"tensor 'a'", "shape entry '-1'"}},
      {"missing offsets",
       R"({"a": {"dtype": "I8", "shape": [1]}})",
       1,
       StatusCode::kInvalidArgument,
       {"tensor 'a'", "data_offsets"}},
      {"metadata", R"({"__metadata__": {"k": 1}})", 0, StatusCode::kInvalidArgument, {"__metadata__ 'k'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    write_raw("bad.safetensors", c.header, c.data);
    Status s = SafetensorsFile::open(path("bad.safetensors")).status();
    std::initializer_list<std::string> none{};
    expect_error(s, c.code, none);
    EXPECT_NE(s.message().find(path("bad.safetensors")), std::string::npos) << s.message();
    for (const std::string& p : c.parts)
      EXPECT_NE(s.message().find(p), std::string::npos) << p << " in " << s.message();
  }
  // A header length beyond the 100 MiB limit is refused before anything is read.
  std::string huge(8, '\0');
  const uint64_t n = uint64_t{1} << 40;
  std::memcpy(huge.data(), &n, 8);
  write_text("huge.safetensors", huge + "{}");
  expect_error(SafetensorsFile::open(path("huge.safetensors")).status(), StatusCode::kInvalidArgument,
               {"bad header", "limit"});
}

// As the reference writer lays files out: metadata first, header padded with spaces to 8 bytes.
TEST_F(WeightsTest, ReadsAHandWrittenFileInTheReferenceLayout) {
  std::string header = R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path("ref.safetensors"), std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  const float a = 0.25f;
  const uint16_t b[2] = {f32_to_bf16(1.0f), f32_to_bf16(-2.0f)};
  out << header;
  out.write(reinterpret_cast<const char*>(&a), 4).write(reinterpret_cast<const char*>(b), 4);
  out.close();
  auto file = SafetensorsFile::open(path("ref.safetensors"));
  ASSERT_TRUE(file) << file.status().to_string();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->tensors()[0].name, "a");  // in data order
  EXPECT_EQ(*reinterpret_cast<const float*>((*file)->find("a")->data), 0.25f);
  EXPECT_EQ(std::memcmp((*file)->find("b")->data, b, 4), 0);
  EXPECT_EQ((*file)->metadata().at(0).second, "pt");
}

TEST_F(WeightsTest, WriterRejectsBadEntries) {
  const std::vector<float> a(4, 0.0f);
  expect_error(write_safetensors(path("w.safetensors"), {entry("a", DType::kF32, {5}, a)}),
               StatusCode::kInvalidArgument, {"tensor 'a'", "needs 20"});
  expect_error(
      write_safetensors(path("w.safetensors"), {entry("a", DType::kF32, {4}, a), entry("a", DType::kF32, {4}, a)}),
      StatusCode::kInvalidArgument, {"tensor 'a'", "twice"});
  expect_error(write_safetensors(dir_ + "/no/such/dir/w.safetensors", {entry("a", DType::kF32, {4}, a)}),
               StatusCode::kNotFound, {"no/such/dir"});
}

// ---- checkpoints ---------------------------------------------------------------------------

TEST_F(WeightsTest, CheckpointConfigEntriesKeepTheirLines) {
  write_text("config.json",
             "{\n  \"hidden_size\": 64,\n  \"architectures\": [\"LongcatFlashForCausalLM\"],\n"
             "  \"rope_scaling\": {\"type\": \"yarn\"},\n  \"model_type\": \"longcat_flash\",\n"
             "  \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false, \"pad\": null\n}\n");
  const std::vector<float> a(4, 0.0f);
  ASSERT_TRUE(write_safetensors(path("model.safetensors"), {entry("a", DType::kF32, {4}, a)}).is_ok());
  auto ckpt = Checkpoint::open(dir_);
  ASSERT_TRUE(ckpt) << ckpt.status().to_string();
  const std::vector<ConfigEntry>& e = (*ckpt)->config_entries();
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0].key, "hidden_size");
  EXPECT_EQ(e[0].value, "64");
  EXPECT_EQ(e[0].line, 2);
  EXPECT_EQ(e[1].key, "model_type");
  EXPECT_EQ(e[1].value, "longcat_flash");
  EXPECT_EQ(e[1].line, 5);
  EXPECT_EQ(e[2].value, "1e-05");
  EXPECT_EQ(e[3].value, "false");
  EXPECT_EQ(e[4].value, "null");
  EXPECT_EQ(e[4].line, 6);
}

TEST_F(WeightsTest, CheckpointErrorsNameTheFile) {
  expect_error(Checkpoint::open(dir_ + "/nowhere").status(), StatusCode::kNotFound, {"nowhere"});
  expect_error(Checkpoint::open(dir_).status(), StatusCode::kNotFound, {"config.json is missing"});
  write_text("config.json", "{\n  \"hidden_size\": 64,\n  \"oops\"\n}\n");
  expect_error(Checkpoint::open(dir_).status(), StatusCode::kInvalidArgument,
               {path("config.json") + ":4:1", "expected ':'"});
  write_text("config.json", "{\"hidden_size\": 64}");
  expect_error(Checkpoint::open(dir_).status(), StatusCode::kNotFound, {"no *.safetensors"});
  const std::vector<float> a(4, 0.0f);
  ASSERT_TRUE(write_safetensors(path("one.safetensors"), {entry("a", DType::kF32, {4}, a)}).is_ok());
  ASSERT_TRUE(write_safetensors(path("two.safetensors"), {entry("a", DType::kF32, {4}, a)}).is_ok());
  expect_error(Checkpoint::open(dir_).status(), StatusCode::kInvalidArgument,
               {"tensor 'a'", "one.safetensors", "two.safetensors"});
  write_text("model.safetensors.index.json", R"({"weight_map": {"a": "one.safetensors", "b": "three.safetensors"}})");
  expect_error(Checkpoint::open(dir_).status(), StatusCode::kNotFound, {"three.safetensors"});
  write_text("model.safetensors.index.json", R"({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}})");
  expect_error(Checkpoint::open(dir_).status(), StatusCode::kNotFound,
               {"model.safetensors.index.json", "tensor 'b'", "two.safetensors"});
  write_text("model.safetensors.index.json", R"({"weights": {}})");
  expect_error(Checkpoint::open(dir_).status(), StatusCode::kInvalidArgument, {"weight_map"});
}

TEST_F(WeightsTest, ShardedCheckpointFindsTensorsThroughTheIndex) {
  write_text("config.json", R"({"hidden_size": 4})");
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  ASSERT_TRUE(write_safetensors(path("model-00001-of-00002.safetensors"), {entry("x.a", DType::kF32, {4}, a)}).is_ok());
  ASSERT_TRUE(write_safetensors(path("model-00002-of-00002.safetensors"), {entry("x.b", DType::kF32, {2}, b)}).is_ok());
  // A stray file the index does not list is not opened.
  write_text("stray.safetensors", "garbage");
  write_text("model.safetensors.index.json", R"({"metadata": {"total_size": 24}, "weight_map": {
      "x.a": "model-00001-of-00002.safetensors", "x.b": "model-00002-of-00002.safetensors"}})");
  auto ckpt = Checkpoint::open(dir_);
  ASSERT_TRUE(ckpt) << ckpt.status().to_string();
  EXPECT_EQ((*ckpt)->tensor_names(), (std::vector<std::string>{"x.a", "x.b"}));
  auto t = (*ckpt)->find("x.b");
  ASSERT_TRUE(t);
  EXPECT_NE(t->file->path().find("00002"), std::string::npos);
  EXPECT_EQ(std::memcmp(t->tensor->data, b.data(), 8), 0);
  expect_error((*ckpt)->find("x.c").status(), StatusCode::kNotFound, {"tensor 'x.c'", dir_});
}

// ---- weight sources ------------------------------------------------------------------------

class CheckpointSourceTest : public WeightsTest {
 protected:
  void SetUp() override {
    WeightsTest::SetUp();
    write_text("config.json", R"({"hidden_size": 8})");
    f32_ = testing::random_floats(8 * 16, 5);
    bf16_ = to_bf16(testing::random_floats(8 * 16, 6));
    ASSERT_TRUE(
        write_safetensors(path("model.safetensors"),
                          {entry("w.f32", DType::kF32, {8, 16}, f32_), entry("w.bf16", DType::kBF16, {8, 16}, bf16_),
                           entry("ids", DType::kI32, {3}, std::vector<int32_t>{1, 2, 3})})
            .is_ok());
    auto ckpt = Checkpoint::open(dir_);
    ASSERT_TRUE(ckpt) << ckpt.status().to_string();
    ckpt_ = *ckpt;
    source_ = checkpoint_weights(ckpt_);
  }
  std::vector<float> f32_;
  std::vector<uint16_t> bf16_;
  std::shared_ptr<Checkpoint> ckpt_;
  std::unique_ptr<WeightSource> source_;
};

TEST_F(CheckpointSourceTest, SameDtypeIsBoundInPlace) {
  Graph g;
  auto w = source_->get(g, "w.f32", DType::kF32, {8, 16}, WeightInit::kLinear);
  ASSERT_TRUE(w) << w.status().to_string();
  const TensorInfo& info = g.tensor(*w);
  EXPECT_EQ(info.kind, TensorKind::kConstant);
  EXPECT_TRUE(info.data.empty());
  EXPECT_EQ(info.external_data, ckpt_->find("w.f32")->tensor->data);
  // Same name in the same graph: the same tensor; in another graph: the same bytes.
  auto again = source_->get(g, "w.f32", DType::kF32, {8, 16}, WeightInit::kLinear);
  EXPECT_EQ(again->id, w->id);
  Graph other;
  auto elsewhere = source_->get(other, "w.f32", DType::kF32, {8, 16}, WeightInit::kLinear);
  EXPECT_EQ(other.tensor(*elsewhere).external_data, info.external_data);
  EXPECT_TRUE(g.verify().is_ok());
}

TEST_F(CheckpointSourceTest, ConvertsBetweenBf16AndF32WithOneCopy) {
  Graph g;
  auto up = source_->get(g, "w.bf16", DType::kF32, {8, 16}, WeightInit::kLinear);
  ASSERT_TRUE(up) << up.status().to_string();
  const auto* got = static_cast<const float*>(g.tensor(*up).external_data);
  for (size_t i = 0; i < bf16_.size(); ++i) ASSERT_EQ(got[i], bf16_to_f32(bf16_[i])) << i;
  auto down = source_->get(g, "w.f32", DType::kBF16, {8, 16}, WeightInit::kLinear);
  ASSERT_TRUE(down) << down.status().to_string();
  const auto* got16 = static_cast<const uint16_t*>(g.tensor(*down).external_data);
  for (size_t i = 0; i < f32_.size(); ++i) ASSERT_EQ(got16[i], f32_to_bf16(f32_[i])) << i;
  // The converted copy is made once and shared by later graphs.
  Graph other;
  auto again = source_->get(other, "w.bf16", DType::kF32, {8, 16}, WeightInit::kLinear);
  EXPECT_EQ(other.tensor(*again).external_data, got);
}

TEST_F(CheckpointSourceTest, ErrorsNameTheFileAndTheTensor) {
  Graph g;
  expect_error(source_->get(g, "w.missing", DType::kF32, {8, 16}, WeightInit::kLinear).status(), StatusCode::kNotFound,
               {"tensor 'w.missing'", dir_, "missing", "model.safetensors"});
  expect_error(source_->get(g, "w.f32", DType::kF32, {16, 8}, WeightInit::kLinear).status(),
               StatusCode::kInvalidArgument, {path("model.safetensors"), "tensor 'w.f32'", "[8, 16]", "[16, 8]"});
  expect_error(source_->get(g, "ids", DType::kF32, {3}, WeightInit::kLinear).status(), StatusCode::kInvalidArgument,
               {path("model.safetensors"), "tensor 'ids'", "i32"});
  expect_error(source_->get_w8a8(g, "ids", {3}).status(), StatusCode::kInvalidArgument, {"'ids'", "[N, K]"});
}

// Tensor / expert parallelism: one rank's part of a weight. Rows are bound in place (only those
// bytes of the file are touched), columns gathered run by run, bf16 converted on the way.
TEST_F(CheckpointSourceTest, ShardsReadOnlyTheirPart) {
  Graph g;
  auto rows = source_->get_shard(g, "w.f32", DType::kF32, {8, 16}, {0, 2, 5}, WeightInit::kLinear);
  ASSERT_TRUE(rows) << rows.status().to_string();
  EXPECT_EQ(g.tensor(*rows).shape, (Shape{3, 16}));
  EXPECT_EQ(g.tensor(*rows).external_data,
            static_cast<const void*>(ckpt_->find("w.f32")->tensor->data + 2 * 16 * sizeof(float)));
  auto cols = source_->get_shard(g, "w.f32", DType::kF32, {8, 16}, {1, 4, 12}, WeightInit::kLinear);
  ASSERT_TRUE(cols) << cols.status().to_string();
  EXPECT_EQ(g.tensor(*cols).shape, (Shape{8, 8}));
  const auto* c = static_cast<const float*>(g.tensor(*cols).external_data);
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 8; ++k) ASSERT_EQ(c[r * 8 + k], f32_[static_cast<size_t>(r * 16 + 4 + k)]) << r << "," << k;
  auto up = source_->get_shard(g, "w.bf16", DType::kF32, {8, 16}, {1, 8, 16}, WeightInit::kLinear);
  ASSERT_TRUE(up) << up.status().to_string();
  const auto* u = static_cast<const float*>(g.tensor(*up).external_data);
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 8; ++k) ASSERT_EQ(u[r * 8 + k], bf16_to_f32(bf16_[static_cast<size_t>(r * 16 + 8 + k)]));
  // A row shard quantises exactly the rows the whole weight's quantisation gives them.
  auto whole = source_->get_w8a8(g, "w.f32", {8, 16});
  auto part = source_->get_w8a8_shard(g, "w.f32", {8, 16}, {0, 4, 8});
  ASSERT_TRUE(whole && part);
  EXPECT_EQ(std::memcmp(static_cast<const int8_t*>(g.tensor(whole->weight).external_data) + 4 * 16,
                        g.tensor(part->weight).external_data, 4 * 16),
            0);
  EXPECT_EQ(std::memcmp(static_cast<const float*>(g.tensor(whole->scale).external_data) + 4,
                        g.tensor(part->scale).external_data, 4 * sizeof(float)),
            0);
  expect_error(source_->get_shard(g, "w.f32", DType::kF32, {8, 16}, {2, 0, 1}, WeightInit::kLinear).status(),
               StatusCode::kInvalidArgument, {"weight 'w.f32'", "dimension 2", "[8, 16]"});
  expect_error(source_->get_shard(g, "w.f32", DType::kF32, {8, 16}, {0, 4, 9}, WeightInit::kLinear).status(),
               StatusCode::kInvalidArgument, {"weight 'w.f32'", "[4, 9)"});
  expect_error(source_->get_shard(g, "w.f32", DType::kF32, {16, 8}, {0, 0, 8}, WeightInit::kLinear).status(),
               StatusCode::kInvalidArgument, {"tensor 'w.f32'", "[8, 16]", "[16, 8]"});
  EXPECT_TRUE(g.verify().is_ok());
}

// Random weights are generated whole and sliced: the shards put together are the whole weight.
TEST(RandomWeights, ShardsPutTogetherAreTheWholeWeight) {
  auto source = random_weights(9);
  Graph g;
  auto whole = source->get(g, "w", DType::kF32, {6, 10}, WeightInit::kLinear);
  ASSERT_TRUE(whole);
  const auto* w = static_cast<const float*>(g.tensor(*whole).external_data);
  for (int part = 0; part < 2; ++part) {
    auto rows = source->get_shard(g, "w", DType::kF32, {6, 10}, {0, part * 3, part * 3 + 3}, WeightInit::kLinear);
    auto cols = source->get_shard(g, "w", DType::kF32, {6, 10}, {1, part * 5, part * 5 + 5}, WeightInit::kLinear);
    ASSERT_TRUE(rows && cols);
    EXPECT_EQ(std::memcmp(g.tensor(*rows).external_data, w + part * 30, 30 * sizeof(float)), 0);
    const auto* c = static_cast<const float*>(g.tensor(*cols).external_data);
    for (int r = 0; r < 6; ++r)
      for (int k = 0; k < 5; ++k) ASSERT_EQ(c[r * 5 + k], w[r * 10 + part * 5 + k]);
  }
}

TEST(RandomWeights, DeterministicPerSeedAndName) {
  auto values = [](WeightSource& src, const std::string& name, WeightInit init, const Shape& shape) {
    Graph g;
    auto t = src.get(g, name, DType::kF32, shape, init);
    EXPECT_TRUE(t) << t.status().to_string();
    const auto* p = static_cast<const float*>(g.tensor(*t).external_data);
    return std::vector<float>(p, p + shape_numel(shape));
  };
  auto a = random_weights(7), b = random_weights(7), c = random_weights(8);
  // Asked in a different order from another source with the same seed: the same values.
  const std::vector<float> a2 = values(*a, "layer.1.w", WeightInit::kLinear, {16, 64});
  const std::vector<float> a1 = values(*a, "layer.0.w", WeightInit::kLinear, {16, 64});
  EXPECT_EQ(values(*b, "layer.0.w", WeightInit::kLinear, {16, 64}), a1);
  EXPECT_EQ(values(*b, "layer.1.w", WeightInit::kLinear, {16, 64}), a2);
  EXPECT_NE(a1, a2);
  EXPECT_NE(values(*c, "layer.0.w", WeightInit::kLinear, {16, 64}), a1);
  for (float v : a1) ASSERT_LE(std::fabs(v), 1.0f / 8.0f);  // 1 / sqrt(64)
  float lo = 1, hi = -1;
  for (float v : a1) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_LT(lo, -0.1f);
  EXPECT_GT(hi, 0.1f);
  for (float v : values(*a, "norm", WeightInit::kNorm, {256})) ASSERT_NEAR(v, 1.0f, 1.0f / 16.0f);
  for (float v : values(*a, "bias", WeightInit::kBias, {256})) ASSERT_LE(std::fabs(v), 1.0f / 64.0f);
  for (float v : values(*a, "zero", WeightInit::kZero, {256})) ASSERT_EQ(v, 0.0f);
  for (float v : values(*a, "emb", WeightInit::kEmbedding, {256})) ASSERT_LE(std::fabs(v), 1.0f);
  // bf16 weights are the f32 ones, rounded.
  Graph g;
  auto w16 = a->get(g, "layer.0.w", DType::kBF16, {16, 64}, WeightInit::kLinear);
  ASSERT_TRUE(w16);
  const auto* p16 = static_cast<const uint16_t*>(g.tensor(*w16).external_data);
  for (size_t i = 0; i < a1.size(); ++i) ASSERT_EQ(p16[i], f32_to_bf16(a1[i]));
  expect_error(a->get(g, "ids", DType::kI32, {4}, WeightInit::kLinear).status(), StatusCode::kUnimplemented,
               {"'ids'", "i32"});
  EXPECT_NE(a->describe().find("seed 7"), std::string::npos);
}

// ---- W8A8 ----------------------------------------------------------------------------------

// q and scale from the reference quantize.i8 on `w` [n, k].
void reference_quantize(const float* w, int64_t n, int64_t k, std::vector<int8_t>* q, std::vector<float>* scale) {
  kernel_test::ManualArgs m;
  std::memcpy(m.in_ptr<float>(SK_DTYPE_F32, {n, k}), w, static_cast<size_t>(n * k) * 4);
  m.out(SK_DTYPE_I8, {n, k}).out(SK_DTYPE_F32, {n});
  ASSERT_EQ(ref::quantize_i8(&m.args()), SK_OK);
  q->assign(m.out_data<int8_t>(0), m.out_data<int8_t>(0) + n * k);
  scale->assign(m.out_data<float>(1), m.out_data<float>(1) + n);
}

void expect_quantized_like_reference(const Graph& g, const QuantizedWeight& qw, const float* w, int64_t n, int64_t k) {
  std::vector<int8_t> q;
  std::vector<float> scale;
  reference_quantize(w, n, k, &q, &scale);
  const TensorInfo& qi = g.tensor(qw.weight);
  const TensorInfo& si = g.tensor(qw.scale);
  EXPECT_EQ(qi.dtype, DType::kI8);
  EXPECT_EQ(qi.shape, (Shape{n, k}));
  EXPECT_EQ(si.dtype, DType::kF32);
  EXPECT_EQ(si.shape, (Shape{n}));
  EXPECT_EQ(std::memcmp(qi.external_data, q.data(), q.size()), 0);
  EXPECT_EQ(std::memcmp(si.external_data, scale.data(), scale.size() * 4), 0);
}

TEST_F(CheckpointSourceTest, W8A8MatchesTheQuantizeReferenceOnEdgeCases) {
  constexpr int64_t n = 6, k = 20;
  std::vector<float> w(n * k);
  for (int64_t i = 0; i < n * k; ++i) w[i] = std::sin(static_cast<float>(i)) * 3.0f;
  std::fill(w.begin() + 1 * k, w.begin() + 2 * k, 0.0f);                        // a zero row
  for (int64_t i = 0; i < k; ++i) w[2 * k + i] = static_cast<float>(i) - 9.5f;  // ties after scaling
  w[2 * k + 3] = 127.0f;
  w[3 * k + 4] = std::numeric_limits<float>::quiet_NaN();
  w[4 * k + 5] = std::numeric_limits<float>::infinity();
  w[5 * k + 6] = -1e-30f;
  ASSERT_TRUE(write_safetensors(path("model.safetensors"), {entry("w", DType::kF32, {n, k}, w)}).is_ok());
  auto ckpt = Checkpoint::open(dir_);
  ASSERT_TRUE(ckpt);
  auto source = checkpoint_weights(*ckpt);
  Graph g;
  auto qw = source->get_w8a8(g, "w", {n, k});
  ASSERT_TRUE(qw) << qw.status().to_string();
  expect_quantized_like_reference(g, *qw, w.data(), n, k);
  EXPECT_EQ(g.tensor(qw->scale).name, "w.scale");
}

// quantize_w8a8_rows on bf16 values in memory gives get_w8a8's bits for the same (widened)
// weights, edge cases included; bad arguments are errors naming the function.
TEST(QuantizeW8A8Rows, GivesGetW8A8sBitsAndRefusesBadArguments) {
  constexpr int64_t n = 5, k = 40;
  std::vector<uint16_t> wb(n * k);
  for (int64_t i = 0; i < n * k; ++i) wb[i] = f32_to_bf16(std::sin(static_cast<float>(i) * 0.7f) * 2.0f);
  std::fill(wb.begin() + k, wb.begin() + 2 * k, uint16_t{0});  // a zero row
  wb[3 * k + 2] = f32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> wf(n * k);
  for (int64_t i = 0; i < n * k; ++i) wf[i] = bf16_to_f32(wb[i]);
  std::vector<int8_t> q(n * k), want_q;
  std::vector<float> scale(n), want_scale;
  ASSERT_TRUE(quantize_w8a8_rows(wb.data(), DType::kBF16, n, k, q.data(), scale.data()).is_ok());
  reference_quantize(wf.data(), n, k, &want_q, &want_scale);
  EXPECT_EQ(std::memcmp(q.data(), want_q.data(), q.size()), 0);
  EXPECT_EQ(std::memcmp(scale.data(), want_scale.data(), scale.size() * 4), 0);
  expect_error(quantize_w8a8_rows(wb.data(), DType::kI32, n, k, q.data(), scale.data()), StatusCode::kInvalidArgument,
               {"quantize_w8a8_rows", "i32"});
  expect_error(quantize_w8a8_rows(nullptr, DType::kF32, n, k, q.data(), scale.data()), StatusCode::kInvalidArgument,
               {"quantize_w8a8_rows", "no data"});
}

// f16 -> f32 is exact for all 65,536 halves (checked against their definition, sign * 2^(e-15)
// * (1 + m / 1024), in double), NaNs stay NaNs of their sign, and f32 -> f16 brings each back.
TEST(Half, F16ToF32IsExactForEveryHalf) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    const bool negative = (h & 0x8000u) != 0;
    ASSERT_EQ(std::signbit(got), negative) << h;
    if (e == 31 && m != 0) {
      ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    double want = e == 31  ? std::numeric_limits<double>::infinity()
                  : e == 0 ? std::ldexp(static_cast<double>(m), -24)
                           : std::ldexp(static_cast<double>(1024 + m), static_cast<int>(e) - 25);
    if (negative) want = -want;
    ASSERT_EQ(static_cast<double>(got), want) << h;
    ASSERT_EQ(f32_to_f16(got), h) << h;
  }
}

// Stacked expert weights [E, N, K] are quantised row by row, each of the E * N rows like
// quantize.i8 on its own, with scales [E, N] (grouped_matmul.w8a8_dyn's layout).
TEST(RandomWeights, W8A8StackedExpertsQuantisePerRow) {
  constexpr int64_t e = 3, n = 8, k = 24;
  auto source = random_weights(5);
  Graph g("experts");
  auto w = source->get(g, "experts", DType::kF32, {e, n, k}, WeightInit::kLinear);
  auto qw = source->get_w8a8(g, "experts", {e, n, k});
  ASSERT_TRUE(w && qw) << qw.status().to_string();
  std::vector<int8_t> q;
  std::vector<float> scale;
  reference_quantize(static_cast<const float*>(g.tensor(*w).external_data), e * n, k, &q, &scale);
  EXPECT_EQ(g.tensor(qw->weight).shape, (Shape{e, n, k}));
  EXPECT_EQ(g.tensor(qw->scale).shape, (Shape{e, n}));
  EXPECT_EQ(std::memcmp(g.tensor(qw->weight).external_data, q.data(), q.size()), 0);
  EXPECT_EQ(std::memcmp(g.tensor(qw->scale).external_data, scale.data(), scale.size() * 4), 0);
  expect_error(source->get_w8a8(g, "experts", {2, e, n, k}).status(), StatusCode::kInvalidArgument,
               {"'experts'", "[E, N, K]"});
}

// Random linear weights quantised at load give the bits the quantize.i8 reference and kernel
// give on the same f32 weights, and matmul.w8a8_dyn runs on them in every mode.
TEST(RandomWeights, W8A8MatchesTheQuantizeReferenceAndKernel) {
  constexpr int64_t n = 48, k = 96, m = 3;
  auto source = random_weights(3);
  Graph g("w8a8");
  auto w = source->get(g, "proj", DType::kF32, {n, k}, WeightInit::kLinear);
  auto qw = source->get_w8a8(g, "proj", {n, k});
  ASSERT_TRUE(w && qw);
  const auto* wf = static_cast<const float*>(g.tensor(*w).external_data);
  expect_quantized_like_reference(g, *qw, wf, n, k);

  Tensor x = g.input("x", DType::kF32, {m, k});
  auto kernel_q = call_kernel(g, "quantize.i8", {*w}, {{DType::kI8, {n, k}, ""}, {DType::kF32, {n}, ""}}, {}, "quant");
  g.output(kernel_q[0], "kq");
  g.output(kernel_q[1], "kscale");
  g.output(call_kernel(g, "matmul.w8a8_dyn", {x, qw->weight, qw->scale}, {{DType::kF32, {m, n}, ""}}, {}, "mm")[0],
           "y");
  auto rt = testing::make_runtime(2);
  const std::vector<float> xs = testing::random_floats(m * k, 4);
  testing::RunResult first;
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto exe = rt->compile(g, CompileOptions::for_mode(mode));
    ASSERT_TRUE(exe) << exe.status().to_string();
    ASSERT_TRUE((*exe)->set_input("x", xs).is_ok());
    ASSERT_TRUE((*exe)->run().is_ok());
    std::vector<int8_t> kq(n * k);
    std::vector<float> kscale(n);
    ASSERT_TRUE((*exe)->read("kq", kq.data(), kq.size()).is_ok());
    ASSERT_TRUE((*exe)->read("kscale", kscale.data(), kscale.size() * 4).is_ok());
    EXPECT_EQ(std::memcmp(kq.data(), g.tensor(qw->weight).external_data, kq.size()), 0);
    EXPECT_EQ(std::memcmp(kscale.data(), g.tensor(qw->scale).external_data, kscale.size() * 4), 0);
    testing::RunResult r = testing::collect_outputs(**exe);
    if (first.names.empty()) {
      first = r;
    } else {
      std::string why;
      EXPECT_TRUE(testing::bitwise_equal(first, r, &why)) << why;
    }
  }
}

}  // namespace
}  // namespace sk
