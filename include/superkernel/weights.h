// Model weights: memory-mapped safetensors files, Hugging Face checkpoint directories, and weight
// sources that put weights into a graph (from a checkpoint, in place, or random from a seed).
//
//   auto ckpt = sk::Checkpoint::open("/models/tiny");           // config.json + *.safetensors
//   if (!ckpt) { std::cerr << ckpt.status().to_string() << "\n"; return 1; }
//   for (const sk::ConfigEntry& e : (*ckpt)->config_entries())
//     if (sk::Status s = config.set(e.key, e.value); !s) ...   // e.line names the config.json line
//   std::unique_ptr<sk::WeightSource> weights = sk::checkpoint_weights(*ckpt);
//   // or, without a checkpoint: sk::random_weights(/*seed=*/42)
//   sk::Graph g("decode");
//   auto w = weights->get(g, "model.layers.0.mlps.0.up_proj.weight", sk::DType::kF32, {ffn, hidden},
//                         sk::WeightInit::kLinear);            // bound in place: no copy
//   if (!w) return w.status();                                  // names the file and the tensor
//   auto q = weights->get_w8a8(g, "model.layers.0.mlps.0.down_proj.weight", {hidden, ffn});
//   // q->weight (i8 [N, K]) and q->scale (f32 [N]) feed matmul.w8a8 / matmul.w8a8_dyn
//   // Tensor parallelism: rank r of 2 holds half of the rows, reading only those bytes.
//   auto half = weights->get_shard(g, "model.layers.0.mlps.0.up_proj.weight", sk::DType::kF32,
//                                  {ffn, hidden}, {0, r * ffn / 2, (r + 1) * ffn / 2}, sk::WeightInit::kLinear);
//
// Tests write tiny checkpoints with write_safetensors().
#ifndef SUPERKERNEL_WEIGHTS_H_
#define SUPERKERNEL_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "superkernel/graph.h"
#include "superkernel/status.h"

namespace sk {

// ---- safetensors ---------------------------------------------------------------------------

// One tensor of a safetensors file; `data` points into the file's read-only mapping.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

// A memory-mapped safetensors file (read-only). Tensors are never copied: their data point into
// the mapping, which lives as long as the SafetensorsFile (hold the shared_ptr).
// Supported dtypes: F32, BF16, F16, I8, I32, I64. Errors name the file and, where there is one,
// the tensor: bad header (bad JSON, missing fields, offsets out of range or overlapping, shape
// and offsets disagreeing), truncated file, unknown or unsupported dtype.
class SafetensorsFile {
 public:
  static Expected<std::shared_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Tensors in the order of their data in the file.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when the file has no tensor `name`.
  const SafetensorsTensor* find(std::string_view name) const;
  // The "__metadata__" string map of the header, in header order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::vector<std::pair<std::string_view, size_t>> by_name_;  // sorted, into tensors_
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// A tensor to write: `bytes` must equal numel * dtype size.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// Writes a safetensors file (header padded so every tensor starts 64-byte aligned in the file).
Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                         const std::vector<std::pair<std::string, std::string>>& metadata = {});

// ---- checkpoint directories ----------------------------------------------------------------

// A key of config.json: the value as text (strings unquoted, numbers as written, true/false/null;
// objects and arrays as compact JSON) and its 1-based line, for "config.json:LINE: key 'k': ..."
// errors. In config_tree(), a member of an object is the entry "object.member".
struct ConfigEntry {
  enum class Kind { kScalar, kObject, kArray };
  std::string key;
  std::string value;
  int line = 0;
  Kind kind = Kind::kScalar;
};

// A tensor found in a checkpoint, with the file that holds it (and keeps its mapping alive).
struct CheckpointTensor {
  std::shared_ptr<const SafetensorsFile> file;
  const SafetensorsTensor* tensor = nullptr;
};

// A Hugging Face checkpoint directory: config.json, one or more *.safetensors files, and
// optionally model.safetensors.index.json ({"weight_map": {tensor: file}}). Without an index every
// *.safetensors file of the directory is opened; a tensor in two files is an error.
class Checkpoint {
 public:
  static Expected<std::shared_ptr<Checkpoint>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string config_path() const { return dir_ + "/config.json"; }
  // Top-level scalar keys of config.json in file order (arrays and objects are skipped).
  const std::vector<ConfigEntry>& config_entries() const { return config_; }
  // Every key of config.json in file order, objects included and flattened: an object's entry
  // (kind kObject) is followed by its members' ("rope_parameters.rope_type", ...); an array is one
  // entry (kind kArray). For loaders that must account for every key (models::load_config_json).
  const std::vector<ConfigEntry>& config_tree() const { return tree_; }
  // Looks a tensor up by its published name; NOT_FOUND names the directory and the tensor.
  Expected<CheckpointTensor> find(std::string_view name) const;
  // Every tensor name, sorted.
  std::vector<std::string> tensor_names() const;
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::string dir_;
  std::vector<ConfigEntry> config_;
  std::vector<ConfigEntry> tree_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> index_;  // name -> (file, tensor), sorted
};

// ---- weight sources ------------------------------------------------------------------------

// The slice [begin, end) along dimension `dim` of a weight: what one rank of a tensor- or
// expert-parallel model holds.
struct Shard {
  int dim = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// How a random source fills a weight (a checkpoint source ignores it).
enum class WeightInit {
  kLinear,     // [.., out, in]: uniform in [-1/sqrt(in), 1/sqrt(in)]
  kNorm,       // close to 1: 1 + uniform in [-1/16, 1/16]
  kBias,       // small: uniform in [-1/64, 1/64]
  kEmbedding,  // uniform in [-1, 1]
  kZero,       // zeros
};
const char* weight_init_name(WeightInit init);

// A linear weight quantised per output channel, as matmul.w8a8 and matmul.w8a8_dyn take it:
// `weight` i8 [N, K] and `scale` f32 [N]; or stacked expert weights as grouped_matmul.w8a8_dyn
// takes them: `weight` i8 [E, N, K] and `scale` f32 [E, N]. Each row is quantised like quantize.i8
// (scale = max|w| / 127, q = round_half_even(w / scale), docs/kernels_matmul.md).
struct QuantizedWeight {
  Tensor weight;
  Tensor scale;
};

// The same per-row quantisation on values in memory: w [rows, k] of f32, bf16 or f16 (widened
// to f32 first, exactly) -> q i8 [rows, k] and scale f32 [rows], the bits get_w8a8 gives. For
// weights that come from elsewhere (the torch.compile backend's `weight_dtype: "w8a8"`).
//
//   std::vector<int8_t> q(rows * k);
//   std::vector<float> scale(rows);
//   SK_RETURN_IF_ERROR(sk::quantize_w8a8_rows(w, sk::DType::kBF16, rows, k, q.data(), scale.data()));
Status quantize_w8a8_rows(const void* w, DType dtype, int64_t rows, int64_t k, int8_t* q, float* scale);

// Puts named weights into graphs as constants. Asking twice for the same name, dtype and shape
// in one graph returns the same tensor. Loaded (or generated, converted, quantised) bytes are kept
// by the source and shared, never copied, by every graph built from it and every executable
// compiled from those graphs. Not thread-safe: build graphs from one thread.
class WeightSource {
 public:
  virtual ~WeightSource();

  // A weight of exactly `dtype` and `shape`. f32 and bf16 are converted into each other when the
  // stored dtype differs (one copy); otherwise the stored bytes are used in place.
  Expected<Tensor> get(Graph& g, const std::string& name, DType dtype, const Shape& shape, WeightInit init);
  // A linear weight [N, K] or stacked expert weights [E, N, K] (stored as f32 or bf16), quantised
  // per row at load time; the constants are named `name` (i8) and `name + ".scale"` (f32).
  Expected<QuantizedWeight> get_w8a8(Graph& g, const std::string& name, const Shape& shape);
  // The part `shard` of the weight `name` whose whole shape is `shape` (checked against the
  // source): a constant named `name` of `shape` with dimension `shard.dim` cut to the shard. A
  // checkpoint reads only the shard's bytes, in place when they are contiguous and of `dtype`;
  // random weights are generated whole and sliced, so the shards of every rank put together are
  // exactly the weight a one-rank model gets.
  Expected<Tensor> get_shard(Graph& g, const std::string& name, DType dtype, const Shape& shape, const Shard& shard,
                             WeightInit init);
  // The shard quantised per row as get_w8a8 does (a shard along the last dimension gets its own
  // scales: each rank quantises the part of the row it multiplies).
  Expected<QuantizedWeight> get_w8a8_shard(Graph& g, const std::string& name, const Shape& shape, const Shard& shard);

  // The bytes get() would bind, without adding a constant to any graph: for loaders that repack or
  // quantise a weight (4-bit weights). Loaded once and shared like get()'s; a checkpoint tensor
  // read this way counts as read (unread_tensors()).
  Expected<std::shared_ptr<const void>> read(const std::string& name, DType dtype, const Shape& shape, WeightInit init);
  // The dtype and shape of a stored tensor; NOT_FOUND when the source has none (random sources
  // store nothing: their weights take any dtype and shape).
  virtual Expected<std::pair<DType, Shape>> stored(const std::string& name) const;
  // Data derived from the weights (a repacked or quantised copy), made by `make` on the first call
  // with `key` and shared by every later one, so graphs built from this source (prefill, decode)
  // share one copy. A failure is returned and not kept.
  using Derived = std::shared_ptr<const void>;
  Expected<Derived> derived(const std::string& key, const std::function<Expected<Derived>()>& make);

  // "checkpoint DIR" or "random weights (seed N)", for messages.
  virtual std::string describe() const = 0;
  // The stored tensors no get() or get_w8a8() has asked for yet, sorted (a checkpoint's tensors
  // that the graphs built so far do not read; random sources store none).
  virtual std::vector<std::string> unread_tensors() const { return {}; }

 protected:
  WeightSource();
  // Bytes of exactly `dtype` and `shape`, aligned to the dtype size; `owner` keeps them valid.
  struct Loaded {
    const void* data = nullptr;
    std::shared_ptr<const void> owner;
  };
  virtual Expected<Loaded> load(const std::string& name, DType dtype, const Shape& shape, WeightInit init) = 0;
  // The shard's bytes (dense, of the shard's shape). The default loads the whole weight and
  // copies the shard out (or points into it, when the shard is contiguous).
  virtual Expected<Loaded> load_shard(const std::string& name, DType dtype, const Shape& shape, const Shard& shard,
                                      WeightInit init);

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

// Deterministic random weights: the values depend only on the seed and the tensor name (and
// shape), so every graph built from any source with the same seed gets the same weights.
std::unique_ptr<WeightSource> random_weights(uint64_t seed);

// Weights from a checkpoint, checked against the requested shape and dtype (errors name the file
// and the tensor).
std::unique_ptr<WeightSource> checkpoint_weights(std::shared_ptr<const Checkpoint> checkpoint);

}  // namespace sk

#endif  // SUPERKERNEL_WEIGHTS_H_
