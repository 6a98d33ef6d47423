#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "superkernel/weights.h"
#include "util/half.h"
#include "util/large_alloc.h"

namespace sk {
namespace {

// 64-byte aligned, zero-filled bytes shared by the graphs and executables that use them (on
// transparent huge pages when large: util/large_alloc.h).
std::shared_ptr<uint8_t> allocate_shared_bytes(size_t bytes) {
  void* p = large_alloc(bytes);
  SK_CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes of weights";
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

bool is_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

float load_float(DType d, const uint8_t* p, int64_t i) {
  switch (d) {
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return bf16_to_f32(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return f16_to_f32(h);
    }
    default: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
  }
}

void store_float(DType d, uint8_t* p, int64_t i, float v) {
  switch (d) {
    case DType::kBF16: {
      const uint16_t h = f32_to_bf16(v);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DType::kF16: {
      const uint16_t h = f32_to_f16(v);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    default:
      std::memcpy(p + 4 * i, &v, 4);
      break;
  }
}

// One copy, converting between float dtypes (or copying when they are equal).
std::shared_ptr<uint8_t> convert(DType from, const uint8_t* src, DType to, int64_t n) {
  auto out = allocate_shared_bytes(static_cast<size_t>(n) * dtype_size(to));
  if (from == to) {
    std::memcpy(out.get(), src, static_cast<size_t>(n) * dtype_size(to));
  } else {
    for (int64_t i = 0; i < n; ++i) store_float(to, out.get(), i, load_float(from, src, i));
  }
  return out;
}

Shape shard_shape(Shape shape, const Shard& shard) {
  shape[static_cast<size_t>(shard.dim)] = shard.end - shard.begin;
  return shape;
}

// Elements before dimension `dim` (how many separate runs a shard along it has) and per index of
// it (the length of each run).
std::pair<int64_t, int64_t> outer_inner(const Shape& shape, int dim) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(dim) + 1; i < shape.size(); ++i) inner *= shape[i];
  return {outer, inner};
}

Status check_shard(const std::string& name, const Shape& shape, const Shard& shard) {
  if (shard.dim < 0 || static_cast<size_t>(shard.dim) >= shape.size() || shard.begin < 0 || shard.end <= shard.begin ||
      shard.end > shape[static_cast<size_t>(shard.dim)])
    return Status::invalid_argument("weight '" + name + "': shard [" + std::to_string(shard.begin) + ", " +
                                    std::to_string(shard.end) + ") of dimension " + std::to_string(shard.dim) +
                                    " does not fit its shape " + shape_to_string(shape));
  return Status::ok();
}

// The shard of a dense tensor `src` of `shape`, read run by run (only the shard's bytes) and
// converted between float dtypes where `from` and `to` differ.
std::shared_ptr<uint8_t> gather_shard(DType from, const uint8_t* src, DType to, const Shape& shape,
                                      const Shard& shard) {
  const auto [outer, inner] = outer_inner(shape, shard.dim);
  const int64_t dim = shape[static_cast<size_t>(shard.dim)], run = (shard.end - shard.begin) * inner;
  auto out = allocate_shared_bytes(static_cast<size_t>(outer * run) * dtype_size(to));
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t first = (o * dim + shard.begin) * inner;
    if (from == to) {
      std::memcpy(out.get() + static_cast<size_t>(o * run) * dtype_size(to),
                  src + static_cast<size_t>(first) * dtype_size(from), static_cast<size_t>(run) * dtype_size(to));
    } else {
      for (int64_t i = 0; i < run; ++i) store_float(to, out.get(), o * run + i, load_float(from, src, first + i));
    }
  }
  return out;
}

// Per-row symmetric int8 quantisation with exactly the definition of quantize.i8
// (docs/kernels_matmul.md): scale = max|x| / 127 (NaN ignored), q = round_half_even(clamp(x /
// scale, -127, 127)), 0 where the quotient is NaN. The kernel lives in a package loaded at run
// time, out of the library's reach; the weights tests check that both give the same bits.
float quantize_row(const float* x, int64_t k, int8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) amax = a;  // false for NaN
  }
  const float scale = amax / 127.0f;
  for (int64_t i = 0; i < k; ++i) {
    const float v = x[i] / scale;
    q[i] = std::isnan(v) ? 0 : static_cast<int8_t>(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
  }
  return scale;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

class RandomWeights final : public WeightSource {
 public:
  explicit RandomWeights(uint64_t seed) : seed_(seed) {}
  std::string describe() const override { return "random weights (seed " + std::to_string(seed_) + ")"; }

 protected:
  Expected<Loaded> load(const std::string& name, DType dtype, const Shape& shape, WeightInit init) override {
    const int64_t n = shape_numel(shape);
    if (n < 0) return Status::invalid_argument("random weight '" + name + "': bad shape " + shape_to_string(shape));
    auto bytes = allocate_shared_bytes(static_cast<size_t>(n) * dtype_size(dtype));
    if (init == WeightInit::kZero) return Loaded{bytes.get(), bytes};
    if (!is_float(dtype))
      return Status::unimplemented("random weight '" + name + "': " + weight_init_name(init) + " init of dtype " +
                                   dtype_name(dtype) +
                                   " (random weights are f32, bf16 or f16; only kZero fills others)");
    float bound = 1.0f;
    float center = 0.0f;
    switch (init) {
      case WeightInit::kLinear:
        bound = 1.0f / std::sqrt(static_cast<float>(shape.empty() ? 1 : std::max<int64_t>(shape.back(), 1)));
        break;
      case WeightInit::kNorm:
        center = 1.0f;
        bound = 1.0f / 16.0f;
        break;
      case WeightInit::kBias:
        bound = 1.0f / 64.0f;
        break;
      case WeightInit::kEmbedding:
      case WeightInit::kZero:
        break;
    }
    uint64_t state = seed_ ^ fnv1a(name);
    for (int64_t i = 0; i < n; ++i) {
      // 24 random bits give an exact float in [-1, 1).
      const float u = static_cast<float>(splitmix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
      store_float(dtype, bytes.get(), i, center + u * bound);
    }
    return Loaded{bytes.get(), bytes};
  }

 private:
  uint64_t seed_;
};

class CheckpointWeights final : public WeightSource {
 public:
  explicit CheckpointWeights(std::shared_ptr<const Checkpoint> ckpt) : ckpt_(std::move(ckpt)) {}
  std::string describe() const override { return "checkpoint " + ckpt_->dir(); }
  Expected<std::pair<DType, Shape>> stored(const std::string& name) const override {
    auto found = ckpt_->find(name);
    if (!found) return found.status();
    return std::make_pair(found->tensor->dtype, found->tensor->shape);
  }
  std::vector<std::string> unread_tensors() const override {
    std::vector<std::string> unread;
    for (std::string& name : ckpt_->tensor_names())
      if (read_.count(name) == 0) unread.push_back(std::move(name));
    return unread;
  }

 protected:
  Expected<Loaded> load(const std::string& name, DType dtype, const Shape& shape, WeightInit) override {
    auto found = find_checked(name, dtype, shape);
    if (!found) return found.status();
    const SafetensorsTensor& t = *found->tensor;
    const bool aligned = reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0;
    if (t.dtype == dtype && aligned) return Loaded{t.data, std::shared_ptr<const void>(found->file, t.data)};
    auto bytes = convert(t.dtype, t.data, dtype, shape_numel(shape));
    return Loaded{bytes.get(), bytes};
  }

  Expected<Loaded> load_shard(const std::string& name, DType dtype, const Shape& shape, const Shard& shard,
                              WeightInit) override {
    // This rank's part of the tensor counts as read, as far as this process can tell.
    auto found = find_checked(name, dtype, shape);
    if (!found) return found.status();
    const SafetensorsTensor& t = *found->tensor;
    const auto [outer, inner] = outer_inner(shape, shard.dim);
    const uint8_t* first = t.data + static_cast<size_t>(shard.begin * inner) * dtype_size(t.dtype);
    // A shard along the outermost dimension (that is not 1) is one run of the file: bound in place.
    if (t.dtype == dtype && outer == 1 && reinterpret_cast<uintptr_t>(first) % dtype_size(dtype) == 0)
      return Loaded{first, std::shared_ptr<const void>(found->file, first)};
    auto bytes = gather_shard(t.dtype, t.data, dtype, shape, shard);
    return Loaded{bytes.get(), bytes};
  }

 private:
  // The tensor `name`, marked read, if its stored shape is `shape` and its dtype is `dtype` or
  // converts into it; otherwise an error naming the file and the tensor.
  Expected<CheckpointTensor> find_checked(const std::string& name, DType dtype, const Shape& shape) {
    auto found = ckpt_->find(name);
    if (!found) return found;
    read_.insert(name);
    const SafetensorsTensor& t = *found->tensor;
    const std::string where = found->file->path() + ": tensor '" + name + "'";
    if (t.shape != shape)
      return Status::invalid_argument(where + " has shape " + shape_to_string(t.shape) + ", expected " +
                                      shape_to_string(shape));
    if (t.dtype != dtype && !(is_float(t.dtype) && is_float(dtype)))
      return Status::invalid_argument(where + " is " + dtype_name(t.dtype) + ", expected " + dtype_name(dtype) +
                                      " (only float dtypes convert into each other)");
    return found;
  }

  std::shared_ptr<const Checkpoint> ckpt_;
  std::set<std::string, std::less<>> read_;
};

}  // namespace

const char* weight_init_name(WeightInit init) {
  switch (init) {
    case WeightInit::kLinear:
      return "linear";
    case WeightInit::kNorm:
      return "norm";
    case WeightInit::kBias:
      return "bias";
    case WeightInit::kEmbedding:
      return "embedding";
    case WeightInit::kZero:
      return "zero";
  }
  return "?";
}

struct WeightSource::Cache {
  using LoadKey = std::tuple<std::string, DType, Shape>;
  std::map<LoadKey, Loaded> loaded;
  std::map<std::tuple<uint32_t, std::string, DType, Shape>, Tensor> tensors;  // per graph uid
  struct Quantized {
    std::shared_ptr<uint8_t> weight;  // i8 [N, K] or [E, N, K]
    std::shared_ptr<uint8_t> scale;   // f32 [N] or [E, N]
  };
  std::map<std::pair<std::string, Shape>, Quantized> quantized;
  std::map<std::tuple<uint32_t, std::string, Shape>, QuantizedWeight> quantized_tensors;
  // Shards: by (name, dtype, whole shape, dim, begin, end), and per graph.
  using ShardKey = std::tuple<std::string, DType, Shape, int, int64_t, int64_t>;
  std::map<ShardKey, Loaded> shards;
  std::map<std::pair<uint32_t, ShardKey>, Tensor> shard_tensors;
  std::map<ShardKey, Quantized> quantized_shards;
  std::map<std::pair<uint32_t, ShardKey>, QuantizedWeight> quantized_shard_tensors;
  std::map<std::string, Derived, std::less<>> derived;
};

WeightSource::WeightSource() : cache_(std::make_unique<Cache>()) {}
WeightSource::~WeightSource() = default;

Expected<Tensor> WeightSource::get(Graph& g, const std::string& name, DType dtype, const Shape& shape,
                                   WeightInit init) {
  const auto key = std::make_tuple(g.uid(), name, dtype, shape);
  if (auto it = cache_->tensors.find(key); it != cache_->tensors.end()) return it->second;
  const Cache::LoadKey load_key{name, dtype, shape};
  auto it = cache_->loaded.find(load_key);
  if (it == cache_->loaded.end()) {
    auto loaded = load(name, dtype, shape, init);
    if (!loaded) return loaded.status();
    it = cache_->loaded.emplace(load_key, std::move(*loaded)).first;
  }
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  Tensor t = g.constant_external(name, dtype, shape, it->second.data, bytes, it->second.owner);
  cache_->tensors.emplace(key, t);
  return t;
}

Expected<std::shared_ptr<const void>> WeightSource::read(const std::string& name, DType dtype, const Shape& shape,
                                                         WeightInit init) {
  const Cache::LoadKey load_key{name, dtype, shape};
  auto it = cache_->loaded.find(load_key);
  if (it == cache_->loaded.end()) {
    auto loaded = load(name, dtype, shape, init);
    if (!loaded) return loaded.status();
    it = cache_->loaded.emplace(load_key, std::move(*loaded)).first;
  }
  return std::shared_ptr<const void>(it->second.owner, it->second.data);
}

Expected<std::pair<DType, Shape>> WeightSource::stored(const std::string& name) const {
  return Status::not_found(describe() + " stores no tensor '" + name + "'");
}

Expected<WeightSource::Derived> WeightSource::derived(const std::string& key,
                                                      const std::function<Expected<Derived>()>& make) {
  if (auto it = cache_->derived.find(key); it != cache_->derived.end()) return it->second;
  Expected<Derived> made = make();
  if (!made) return made.status();
  cache_->derived.emplace(key, *made);
  return *made;
}

Expected<QuantizedWeight> WeightSource::get_w8a8(Graph& g, const std::string& name, const Shape& shape) {
  const bool valid_rank = shape.size() == 2 || shape.size() == 3;
  if (!valid_rank || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    return Status::invalid_argument("get_w8a8('" + name + "'): shape " + shape_to_string(shape) +
                                    " is not a linear weight [N, K] or stacked expert weights [E, N, K]");
  const auto key = std::make_tuple(g.uid(), name, shape);
  if (auto it = cache_->quantized_tensors.find(key); it != cache_->quantized_tensors.end()) return it->second;
  // Every row of the last dimension is quantised on its own: [E, N, K] is E * N rows of K.
  const int64_t k = shape.back();
  const Shape scale_shape(shape.begin(), shape.end() - 1);
  const int64_t rows = shape_numel(scale_shape);
  auto it = cache_->quantized.find({name, shape});
  if (it == cache_->quantized.end()) {
    // The f32 values are only needed here: not cached.
    auto values = load(name, DType::kF32, shape, WeightInit::kLinear);
    if (!values) return values.status().with_context("get_w8a8('" + name + "')");
    Cache::Quantized q{allocate_shared_bytes(static_cast<size_t>(shape_numel(shape))),
                       allocate_shared_bytes(static_cast<size_t>(rows) * sizeof(float))};
    const auto* w = static_cast<const float*>(values->data);
    auto* qw = reinterpret_cast<int8_t*>(q.weight.get());
    auto* scale = reinterpret_cast<float*>(q.scale.get());
    for (int64_t row = 0; row < rows; ++row) scale[row] = quantize_row(w + row * k, k, qw + row * k);
    it = cache_->quantized.emplace(std::make_pair(name, shape), std::move(q)).first;
  }
  QuantizedWeight out;
  out.weight = g.constant_external(name, DType::kI8, shape, it->second.weight.get(),
                                   static_cast<size_t>(shape_numel(shape)), it->second.weight);
  out.scale = g.constant_external(name + ".scale", DType::kF32, scale_shape, it->second.scale.get(),
                                  static_cast<size_t>(rows) * sizeof(float), it->second.scale);
  cache_->quantized_tensors.emplace(key, out);
  return out;
}

Status quantize_w8a8_rows(const void* w, DType dtype, int64_t rows, int64_t k, int8_t* q, float* scale) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16)
    return Status::invalid_argument(std::string("quantize_w8a8_rows: weights of dtype ") + dtype_name(dtype) +
                                    ", expected f32, bf16 or f16");
  if (rows < 0 || k < 0) return Status::invalid_argument("quantize_w8a8_rows: negative shape");
  if (rows * k > 0 && (w == nullptr || q == nullptr || scale == nullptr))
    return Status::invalid_argument("quantize_w8a8_rows: no data");
  std::vector<float> row(static_cast<size_t>(k));
  const auto* bytes = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < k; ++i) row[static_cast<size_t>(i)] = load_float(dtype, bytes, r * k + i);
    scale[r] = quantize_row(row.data(), k, q + r * k);
  }
  return Status::ok();
}

Expected<WeightSource::Loaded> WeightSource::load_shard(const std::string& name, DType dtype, const Shape& shape,
                                                        const Shard& shard, WeightInit init) {
  auto whole = load(name, dtype, shape, init);
  if (!whole) return whole.status();
  const auto [outer, inner] = outer_inner(shape, shard.dim);
  if (outer == 1) {
    const auto* first =
        static_cast<const uint8_t*>(whole->data) + static_cast<size_t>(shard.begin * inner) * dtype_size(dtype);
    return Loaded{first, std::shared_ptr<const void>(whole->owner, first)};
  }
  auto bytes = gather_shard(dtype, static_cast<const uint8_t*>(whole->data), dtype, shape, shard);
  return Loaded{bytes.get(), bytes};
}

Expected<Tensor> WeightSource::get_shard(Graph& g, const std::string& name, DType dtype, const Shape& shape,
                                         const Shard& shard, WeightInit init) {
  SK_RETURN_IF_ERROR(check_shard(name, shape, shard));
  const Cache::ShardKey key{name, dtype, shape, shard.dim, shard.begin, shard.end};
  if (auto it = cache_->shard_tensors.find({g.uid(), key}); it != cache_->shard_tensors.end()) return it->second;
  auto it = cache_->shards.find(key);
  if (it == cache_->shards.end()) {
    auto loaded = load_shard(name, dtype, shape, shard, init);
    if (!loaded) return loaded.status();
    it = cache_->shards.emplace(key, std::move(*loaded)).first;
  }
  const Shape part = shard_shape(shape, shard);
  Tensor t = g.constant_external(name, dtype, part, it->second.data,
                                 static_cast<size_t>(shape_numel(part)) * dtype_size(dtype), it->second.owner);
  cache_->shard_tensors.emplace(std::make_pair(g.uid(), key), t);
  return t;
}

Expected<QuantizedWeight> WeightSource::get_w8a8_shard(Graph& g, const std::string& name, const Shape& shape,
                                                       const Shard& shard) {
  const bool valid_rank = shape.size() == 2 || shape.size() == 3;
  if (!valid_rank || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    return Status::invalid_argument("get_w8a8_shard('" + name + "'): shape " + shape_to_string(shape) +
                                    " is not a linear weight [N, K] or stacked expert weights [E, N, K]");
  SK_RETURN_IF_ERROR(check_shard(name, shape, shard));
  const Cache::ShardKey key{name, DType::kI8, shape, shard.dim, shard.begin, shard.end};
  if (auto it = cache_->quantized_shard_tensors.find({g.uid(), key}); it != cache_->quantized_shard_tensors.end())
    return it->second;
  const Shape part = shard_shape(shape, shard);
  const int64_t k = part.back();
  const Shape scale_shape(part.begin(), part.end() - 1);
  const int64_t rows = shape_numel(scale_shape);
  auto it = cache_->quantized_shards.find(key);
  if (it == cache_->quantized_shards.end()) {
    auto values = load_shard(name, DType::kF32, shape, shard, WeightInit::kLinear);
    if (!values) return values.status().with_context("get_w8a8_shard('" + name + "')");
    Cache::Quantized q{allocate_shared_bytes(static_cast<size_t>(shape_numel(part))),
                       allocate_shared_bytes(static_cast<size_t>(rows) * sizeof(float))};
    const auto* w = static_cast<const float*>(values->data);
    auto* qw = reinterpret_cast<int8_t*>(q.weight.get());
    auto* scale = reinterpret_cast<float*>(q.scale.get());
    for (int64_t row = 0; row < rows; ++row) scale[row] = quantize_row(w + row * k, k, qw + row * k);
    it = cache_->quantized_shards.emplace(key, std::move(q)).first;
  }
  QuantizedWeight out;
  out.weight = g.constant_external(name, DType::kI8, part, it->second.weight.get(),
                                   static_cast<size_t>(shape_numel(part)), it->second.weight);
  out.scale = g.constant_external(name + ".scale", DType::kF32, scale_shape, it->second.scale.get(),
                                  static_cast<size_t>(rows) * sizeof(float), it->second.scale);
  cache_->quantized_shard_tensors.emplace(std::make_pair(g.uid(), key), out);
  return out;
}

std::unique_ptr<WeightSource> random_weights(uint64_t seed) { return std::make_unique<RandomWeights>(seed); }

std::unique_ptr<WeightSource> checkpoint_weights(std::shared_ptr<const Checkpoint> checkpoint) {
  return std::make_unique<CheckpointWeights>(std::move(checkpoint));
}

}  // namespace sk
