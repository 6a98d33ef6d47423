// safetensors: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then the
// tensor bytes; offsets count from the first byte after the header.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "superkernel/output_file.h"
#include "superkernel/weights.h"
#include "weights/json.h"

namespace sk {
namespace {

// Larger headers are refused before anything is parsed (the reference implementation's limit).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr size_t kWriterAlign = 64;

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kSupported[] = {{"F32", DType::kF32}, {"BF16", DType::kBF16}, {"F16", DType::kF16},
                                    {"I8", DType::kI8},   {"I32", DType::kI32},   {"I64", DType::kI64}};
// Valid safetensors dtypes this library has no kernels for.
constexpr const char* kUnsupported[] = {"F64", "U8", "I16", "U16", "U32", "U64", "BOOL", "F8_E4M3", "F8_E5M2"};

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kSupported)
    if (d.dtype == dtype) return d.name;
  return nullptr;
}

std::string errno_text() { return std::strerror(errno); }

// numel * element size, or -1 on overflow.
int64_t checked_bytes(const Shape& shape, size_t elem) {
  int64_t n = static_cast<int64_t>(elem);
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

Status parse_tensor(const std::string& path, const std::string& name, const json::Value& v, SafetensorsTensor* out,
                    int64_t* begin, int64_t* end) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!v.is_object())
    return Status::invalid_argument(where + ": header entry is " + json::kind_name(v.kind) + ", expected an object");
  const json::Value* dtype = v.find("dtype");
  const json::Value* shape = v.find("shape");
  const json::Value* offsets = v.find("data_offsets");
  if (!dtype || !dtype->is_string()) return Status::invalid_argument(where + ": header has no string 'dtype'");
  if (!shape || !shape->is_array()) return Status::invalid_argument(where + ": header has no array 'shape'");
  if (!offsets || !offsets->is_array() || offsets->items.size() != 2)
    return Status::invalid_argument(where + ": header has no 'data_offsets' [begin, end]");
  const DTypeName* found = nullptr;
  for (const DTypeName& d : kSupported)
    if (dtype->text == d.name) found = &d;
  if (!found) {
    for (const char* u : kUnsupported)
      if (dtype->text == u) return Status::unimplemented(where + ": dtype " + dtype->text + " is not supported");
    return Status::invalid_argument(where + ": unknown dtype '" + dtype->text + "'");
  }
  out->name = name;
  out->dtype = found->dtype;
  for (const json::Value& d : shape->items) {
    int64_t extent = 0;
    if (!json::as_non_negative_int(d, &extent))
      return Status::invalid_argument(where + ": shape entry '" + d.text + "' is not a non-negative integer");
    out->shape.push_back(extent);
  }
  if (!json::as_non_negative_int(offsets->items[0], begin) || !json::as_non_negative_int(offsets->items[1], end))
    return Status::invalid_argument(where + ": data_offsets are not non-negative integers");
  if (*end < *begin)
    return Status::invalid_argument(where + ": data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) +
                                    "] end before they begin");
  const int64_t want = checked_bytes(out->shape, dtype_size(out->dtype));
  if (want < 0) return Status::invalid_argument(where + ": shape " + shape_to_string(out->shape) + " is too large");
  if (*end - *begin != want)
    return Status::invalid_argument(where + ": data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) +
                                    "] hold " + std::to_string(*end - *begin) + " bytes, " + dtype->text +
                                    shape_to_string(out->shape) + " needs " + std::to_string(want));
  return Status::ok();
}

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, map_bytes_);
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  return it != by_name_.end() && it->first == name ? &tensors_[it->second] : nullptr;
}

Expected<std::shared_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::not_found(path + ": cannot open (" + errno_text() + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid_argument(path + ": not a regular file");
  }
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Status::invalid_argument(path + ": truncated: " + std::to_string(size) +
                                    " bytes, shorter than the 8-byte header length");
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Status::internal(path + ": mmap failed (" + errno_text() + ")");
  file->map_ = map;
  file->map_bytes_ = size;
  const auto* base = static_cast<const uint8_t*>(map);

  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | base[i];
  if (header_bytes > kMaxHeaderBytes)
    return Status::invalid_argument(path + ": bad header: length " + std::to_string(header_bytes) +
                                    " exceeds the 100 MiB limit");
  if (header_bytes > size - 8)
    return Status::invalid_argument(path + ": truncated: the header needs " + std::to_string(header_bytes) +
                                    " bytes, the file has " + std::to_string(size - 8) + " after the length");
  const std::string_view header(reinterpret_cast<const char*>(base + 8), header_bytes);
  auto doc = json::parse(header, path + " (header)");
  if (!doc) return doc.status().with_context("bad header");
  if (!doc->is_object())
    return Status::invalid_argument(path + ": bad header: " + json::kind_name(doc->kind) + ", expected an object");

  const uint8_t* data = base + 8 + header_bytes;
  const uint64_t data_bytes = size - 8 - header_bytes;
  struct Span {
    int64_t begin, end;
    size_t tensor;
  };
  std::vector<Span> spans;
  for (const auto& [name, v] : doc->members) {
    if (name == "__metadata__") {
      if (!v.is_object()) return Status::invalid_argument(path + ": bad header: __metadata__ is not an object");
      for (const auto& [k, m] : v.members) {
        if (!m.is_string())
          return Status::invalid_argument(path + ": bad header: __metadata__ '" + k + "' is not a string");
        file->metadata_.emplace_back(k, m.text);
      }
      continue;
    }
    SafetensorsTensor t;
    int64_t begin = 0, end = 0;
    SK_RETURN_IF_ERROR(parse_tensor(path, name, v, &t, &begin, &end));
    if (static_cast<uint64_t>(end) > data_bytes)
      return Status::invalid_argument(path + ": truncated: tensor '" + name + "' ends at data byte " +
                                      std::to_string(end) + ", the file holds " + std::to_string(data_bytes) +
                                      " data bytes");
    t.data = data + begin;
    t.bytes = static_cast<size_t>(end - begin);
    spans.push_back({begin, end, file->tensors_.size()});
    file->tensors_.push_back(std::move(t));
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const Span* widest = nullptr;  // the non-empty span reaching furthest so far
  for (const Span& b : spans) {
    if (b.begin == b.end) continue;
    if (widest && b.begin < widest->end)
      return Status::invalid_argument(path + ": bad header: tensor '" + file->tensors_[b.tensor].name + "' [" +
                                      std::to_string(b.begin) + ", " + std::to_string(b.end) + ") overlaps tensor '" +
                                      file->tensors_[widest->tensor].name + "' [" + std::to_string(widest->begin) +
                                      ", " + std::to_string(widest->end) + ")");
    if (!widest || b.end > widest->end) widest = &b;
  }
  std::vector<SafetensorsTensor> ordered;
  ordered.reserve(spans.size());
  for (const Span& s : spans) ordered.push_back(std::move(file->tensors_[s.tensor]));
  file->tensors_ = std::move(ordered);
  for (size_t i = 0; i < file->tensors_.size(); ++i) file->by_name_.emplace_back(file->tensors_[i].name, i);
  std::sort(file->by_name_.begin(), file->by_name_.end());
  return file;
}

Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  // Wider elements first: with no holes between tensors every one stays aligned to its size.
  std::vector<const SafetensorsEntry*> order;
  std::unordered_set<std::string> names;
  for (const SafetensorsEntry& e : entries) {
    const std::string where = "write_safetensors('" + path + "'): tensor '" + e.name + "'";
    if (e.name.empty() || e.name == "__metadata__")
      return Status::invalid_argument("write_safetensors('" + path + "'): bad tensor name '" + e.name + "'");
    if (!names.insert(e.name).second) return Status::invalid_argument(where + " appears twice");
    if (!safetensors_dtype_name(e.dtype))
      return Status::unimplemented(where + ": dtype " + dtype_name(e.dtype) + " cannot be written");
    const int64_t want = checked_bytes(e.shape, dtype_size(e.dtype));
    if (want < 0 || static_cast<size_t>(want) != e.bytes || (e.data == nullptr && e.bytes != 0))
      return Status::invalid_argument(where + ": got " + std::to_string(e.bytes) + " bytes, " + dtype_name(e.dtype) +
                                      shape_to_string(e.shape) + " needs " + std::to_string(want));
    order.push_back(&e);
  }
  std::stable_sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });

  auto quoted = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  };
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i)
      header += (i ? "," : "") + quoted(metadata[i].first) + ":" + quoted(metadata[i].second);
    header += "}";
  }
  size_t offset = 0;
  for (const SafetensorsEntry* e : order) {
    if (header.size() > 1) header += ",";
    header += quoted(e->name) + ":{\"dtype\":\"" + safetensors_dtype_name(e->dtype) + "\",\"shape\":[";
    for (size_t d = 0; d < e->shape.size(); ++d) header += (d ? "," : "") + std::to_string(e->shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + e->bytes) + "]}";
    offset += e->bytes;
  }
  header += "}";
  // Spaces after the JSON put the data at a 64-byte file offset, so the mapping is aligned.
  header.append((kWriterAlign - (8 + header.size()) % kWriterAlign) % kWriterAlign, ' ');

  auto out = OutputFile::open(path);
  if (!out) return out.status().with_context("write_safetensors");
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  Status s = out->write(length, 8);
  if (s) s = out->write(header);
  for (const SafetensorsEntry* e : order)
    if (s) s = out->write(e->data, e->bytes);
  if (s) s = out->commit();
  return s.with_context("write_safetensors");
}

}  // namespace sk
