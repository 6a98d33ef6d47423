#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "superkernel/weights.h"
#include "weights/json.h"

namespace sk {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexFile = "model.safetensors.index.json";

Expected<json::Value> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), path);
}

// Compact JSON of a value, for messages about objects and arrays.
std::string compact_json(const json::Value& v) {
  switch (v.kind) {
    case json::Value::Kind::kString: {
      std::string out = "\"";
      for (char c : v.text) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
      return out + "\"";
    }
    case json::Value::Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < v.items.size(); ++i) out += (i ? "," : "") + compact_json(v.items[i]);
      return out + "]";
    }
    case json::Value::Kind::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < v.members.size(); ++i)
        out += (i ? ",\"" : "\"") + v.members[i].first + "\":" + compact_json(v.members[i].second);
      return out + "}";
    }
    default:
      return v.text;
  }
}

// Every key of an object, members of nested objects as "parent.member" after their parent.
void flatten(const std::string& key, const json::Value& v, std::vector<ConfigEntry>& out) {
  if (v.is_object()) {
    out.push_back({key, compact_json(v), v.line, ConfigEntry::Kind::kObject});
    for (const auto& [member, child] : v.members) flatten(key + "." + member, child, out);
  } else if (v.is_array()) {
    out.push_back({key, compact_json(v), v.line, ConfigEntry::Kind::kArray});
  } else {
    out.push_back({key, v.text, v.line, ConfigEntry::Kind::kScalar});
  }
}

}  // namespace

Expected<std::shared_ptr<Checkpoint>> Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::not_found("checkpoint '" + dir + "' is not a directory");
  auto ckpt = std::make_shared<Checkpoint>();
  ckpt->dir_ = dir;
  while (ckpt->dir_.size() > 1 && ckpt->dir_.back() == '/') ckpt->dir_.pop_back();
  const std::string config_path = ckpt->config_path();
  if (!fs::exists(config_path, ec)) return Status::not_found("checkpoint '" + ckpt->dir_ + "': config.json is missing");
  auto config = read_json(config_path);
  if (!config) return config.status();
  if (!config->is_object())
    return Status::invalid_argument(config_path + ":" + std::to_string(config->line) + ": config is " +
                                    json::kind_name(config->kind) + ", expected an object");
  for (const auto& [key, v] : config->members) {
    if (!v.is_object() && !v.is_array()) ckpt->config_.push_back({key, v.text, v.line});
    flatten(key, v, ckpt->tree_);
  }

  // Which files hold which tensors: the index when there is one, else every *.safetensors file.
  std::vector<std::string> file_names;
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> file
  const std::string index_path = ckpt->dir_ + "/" + kIndexFile;
  const bool indexed = fs::exists(index_path, ec);
  if (indexed) {
    auto index = read_json(index_path);
    if (!index) return index.status();
    const json::Value* map = index->is_object() ? index->find("weight_map") : nullptr;
    if (!map || !map->is_object())
      return Status::invalid_argument(index_path + ": no \"weight_map\" object of tensor name -> file");
    for (const auto& [tensor, file] : map->members) {
      if (!file.is_string() || file.text.empty() || file.text.find('/') != std::string::npos)
        return Status::invalid_argument(index_path + ":" + std::to_string(file.line) + ": tensor '" + tensor +
                                        "': the file must be a file name in the checkpoint directory");
      weight_map.emplace_back(tensor, file.text);
      if (std::find(file_names.begin(), file_names.end(), file.text) == file_names.end())
        file_names.push_back(file.text);
    }
  } else {
    for (const fs::directory_entry& e : fs::directory_iterator(ckpt->dir_, ec))
      if (e.path().extension() == ".safetensors") file_names.push_back(e.path().filename().string());
    std::sort(file_names.begin(), file_names.end());
  }
  if (file_names.empty())
    return Status::not_found("checkpoint '" + ckpt->dir_ + "': no *.safetensors file" +
                             (indexed ? std::string(" listed in ") + kIndexFile : std::string()));

  for (const std::string& name : file_names) {
    auto file = SafetensorsFile::open(ckpt->dir_ + "/" + name);
    if (!file) return file.status();
    ckpt->files_.push_back(std::move(*file));
  }

  auto& index = ckpt->index_;
  if (indexed) {
    for (const auto& [tensor, file_name] : weight_map) {
      const size_t f =
          static_cast<size_t>(std::find(file_names.begin(), file_names.end(), file_name) - file_names.begin());
      const SafetensorsTensor* t = ckpt->files_[f]->find(tensor);
      if (!t)
        return Status::not_found(index_path + ": tensor '" + tensor + "' is listed in '" + file_name +
                                 "', which does not hold it");
      index.push_back({tensor, {f, static_cast<size_t>(t - ckpt->files_[f]->tensors().data())}});
    }
  } else {
    for (size_t f = 0; f < ckpt->files_.size(); ++f)
      for (size_t t = 0; t < ckpt->files_[f]->tensors().size(); ++t)
        index.push_back({ckpt->files_[f]->tensors()[t].name, {f, t}});
  }
  std::sort(index.begin(), index.end());
  for (size_t i = 1; i < index.size(); ++i)
    if (index[i].first == index[i - 1].first)
      return Status::invalid_argument("checkpoint '" + ckpt->dir_ + "': tensor '" + index[i].first + "' is in both " +
                                      ckpt->files_[index[i - 1].second.first]->path() + " and " +
                                      ckpt->files_[index[i].second.first]->path());
  return ckpt;
}

Expected<CheckpointTensor> Checkpoint::find(std::string_view name) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  if (it == index_.end() || it->first != name) {
    std::string searched;
    for (size_t f = 0; f < files_.size() && f < 3; ++f)
      searched += (f ? ", " : "") + fs::path(files_[f]->path()).filename().string();
    if (files_.size() > 3) searched += " and " + std::to_string(files_.size() - 3) + " more";
    return Status::not_found("checkpoint '" + dir_ + "': tensor '" + std::string(name) + "' is missing (searched " +
                             searched + ")");
  }
  const auto& file = files_[it->second.first];
  return CheckpointTensor{file, &file->tensors()[it->second.second]};
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& entry : index_) names.push_back(entry.first);
  return names;
}

}  // namespace sk
