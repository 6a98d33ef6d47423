// Host-side paged-cache bookkeeping: block tables, slot mapping, positions per run.
#include <algorithm>
#include <string>

#include "models/model_util.h"
#include "superkernel/models.h"
#include "superkernel/runtime.h"

namespace sk::models {

namespace {
Status layout_error(const BuildOptions& o) {
  const std::pair<const char*, int64_t> sizes[] = {{"batch", o.batch},
                                                   {"block_size", o.block_size},
                                                   {"max_context", o.max_context},
                                                   {"prefill_tokens", o.prefill_tokens}};
  for (auto [name, value] : sizes)
    if (value <= 0)
      return Status::invalid_argument("paged cache layout: build option '" + std::string(name) +
                                      "' must be positive, got " + std::to_string(value));
  return Status::ok();
}
}  // namespace

PagedCacheLayout::PagedCacheLayout(const BuildOptions& options)
    : status_(layout_error(options)),
      batch_(status_ ? options.batch : 0),
      block_size_(status_ ? options.block_size : 1),
      max_blocks_(status_ ? models::max_blocks_per_sequence(options) : 0),
      max_context_(status_ ? options.max_context : 0),
      prefill_tokens_(status_ ? options.prefill_tokens : 0),
      prefill_logits_(options.prefill_logits),
      lens_(static_cast<size_t>(batch_), 0),
      last_rows_(static_cast<size_t>(batch_), -1),
      block_tables_(static_cast<size_t>(batch_ * max_blocks_)) {
  // Block j of sequence b is block j * batch + b: the sequences' blocks interleave, so a kernel
  // that ignored the block table would read another sequence's tokens.
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t j = 0; j < max_blocks_; ++j) block_tables_[b * max_blocks_ + j] = static_cast<int32_t>(j * batch_ + b);
}

int32_t PagedCacheLayout::slot(int64_t sequence, int64_t position) const {
  if (!in_batch(sequence) || position < 0 || position >= max_context_) return -1;
  const int32_t block = block_tables_[sequence * max_blocks_ + position / block_size_];
  return static_cast<int32_t>(block * block_size_ + position % block_size_);
}

Expected<StepInputs> PagedCacheLayout::prefill(const std::vector<std::vector<int32_t>>& prompts) {
  SK_RETURN_IF_ERROR(status_);
  if (static_cast<int64_t>(prompts.size()) != batch_)
    return Status::invalid_argument("prefill: " + std::to_string(prompts.size()) + " prompts for a batch of " +
                                    std::to_string(batch_) + " sequences");
  int64_t total = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    total += static_cast<int64_t>(prompts[b].size());
    if (lens_[b] + static_cast<int64_t>(prompts[b].size()) > max_context_)
      return Status::invalid_argument("prefill: sequence " + std::to_string(b) + " would hold " +
                                      std::to_string(lens_[b] + prompts[b].size()) + " tokens, more than max_context " +
                                      std::to_string(max_context_));
  }
  if (total > prefill_tokens_)
    return Status::invalid_argument("prefill: the prompts hold " + std::to_string(total) +
                                    " tokens, more than the graph's prefill_tokens " + std::to_string(prefill_tokens_));
  StepInputs in;
  in.phase = Phase::kPrefill;
  in.block_tables = block_tables_;
  for (int64_t b = 0; b < batch_; ++b) {
    for (int32_t id : prompts[b]) {
      in.input_ids.push_back(id);
      in.seq_ids.push_back(static_cast<int32_t>(b));
      in.positions.push_back(static_cast<int32_t>(lens_[b]));
      in.slot_mapping.push_back(slot(b, lens_[b]));
      ++lens_[b];
    }
    last_rows_[b] = static_cast<int64_t>(in.input_ids.size()) - 1;
    // An empty prompt has no last token: its row (0) gives logits that mean nothing.
    if (prefill_logits_ == PrefillLogits::kLastToken)
      in.logit_rows.push_back(prompts[b].empty() ? 0 : static_cast<int32_t>(last_rows_[b]));
  }
  // Padding: token 0 of sequence 0 at position 0, written nowhere.
  while (static_cast<int64_t>(in.input_ids.size()) < prefill_tokens_) {
    in.input_ids.push_back(0);
    in.seq_ids.push_back(0);
    in.positions.push_back(0);
    in.slot_mapping.push_back(-1);
  }
  return in;
}

Expected<StepInputs> PagedCacheLayout::decode(const std::vector<int32_t>& ids) {
  SK_RETURN_IF_ERROR(status_);
  if (static_cast<int64_t>(ids.size()) != batch_)
    return Status::invalid_argument("decode: " + std::to_string(ids.size()) + " token ids for a batch of " +
                                    std::to_string(batch_) + " sequences");
  for (int64_t b = 0; b < batch_; ++b)
    if (lens_[b] + 1 > max_context_)
      return Status::invalid_argument("decode: sequence " + std::to_string(b) + " is full (max_context " +
                                      std::to_string(max_context_) + ")");
  StepInputs in;
  in.phase = Phase::kDecode;
  in.input_ids = ids;
  in.block_tables = block_tables_;
  for (int64_t b = 0; b < batch_; ++b) {
    in.positions.push_back(static_cast<int32_t>(lens_[b]));
    in.slot_mapping.push_back(slot(b, lens_[b]));
    ++lens_[b];
    in.context_lens.push_back(static_cast<int32_t>(lens_[b]));
  }
  return in;
}

void PagedCacheLayout::reset() {
  std::fill(lens_.begin(), lens_.end(), 0);
  std::fill(last_rows_.begin(), last_rows_.end(), -1);
}

Status set_step_inputs(Executable& exe, const StepInputs& in) {
  auto feed = [&](const char* name, const std::vector<int32_t>& values) {
    return exe.set_input(name, values.data(), values.size() * sizeof(int32_t));
  };
  SK_RETURN_IF_ERROR(feed(kInputIds, in.input_ids));
  SK_RETURN_IF_ERROR(feed(kPositions, in.positions));
  SK_RETURN_IF_ERROR(feed(kSlotMapping, in.slot_mapping));
  SK_RETURN_IF_ERROR(feed(kBlockTables, in.block_tables));
  if (in.phase == Phase::kDecode) return feed(kContextLens, in.context_lens);
  if (!in.logit_rows.empty()) SK_RETURN_IF_ERROR(feed(kLogitRows, in.logit_rows));
  return feed(kSeqIds, in.seq_ids);
}

Status CacheStorage::bind(Executable& exe, const std::vector<std::string>& names) {
  const bool first = names_.empty();
  if (!first && names != names_)
    return Status::invalid_argument("cache storage: bound to other cache names than the first executable's");
  for (size_t i = 0; i < names.size(); ++i) {
    Expected<HostTensor> t = exe.tensor(names[i]);
    if (!t) return t.status().with_context("cache storage");
    const size_t bytes = t->bytes();
    if (first) {
      buffers_.emplace_back((bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
      bytes_.push_back(bytes);
    } else if (bytes != bytes_[i]) {
      return Status::invalid_argument("cache storage: cache '" + names[i] + "' has " + std::to_string(bytes) +
                                      " bytes here, " + std::to_string(bytes_[i]) + " in the first executable");
    }
    SK_RETURN_IF_ERROR(exe.bind_variable(names[i], buffers_[i].data(), bytes));
  }
  if (first) names_ = names;
  return Status::ok();
}

void CacheStorage::clear() {
  for (auto& buffer : buffers_) std::fill(buffer.begin(), buffer.end(), 0);
}

}  // namespace sk::models
