#include "data/gpt_samples.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "util/error.h"

namespace trainbench::data {

namespace {

constexpr char kIndexWhere[] = "GPT sample index";
constexpr char kBlendWhere[] = "GPT dataset blend";
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// numpy's pairwise summation of a contiguous float64 array (np.sum), so that a blend of many datasets
// normalises its weights to the same last bit as BlendableDataset.
double numpy_pairwise_sum(const double* values, size_t n) {
  if (n < 8) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += values[i];
    return sum;
  }
  if (n <= 128) {
    double partial[8];
    for (size_t j = 0; j < 8; ++j) partial[j] = values[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (size_t j = 0; j < 8; ++j) partial[j] += values[i + j];
    double sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                 ((partial[4] + partial[5]) + (partial[6] + partial[7]));
    for (; i < n; ++i) sum += values[i];
    return sum;
  }
  size_t half = n / 2;
  half -= half % 8;
  return numpy_pairwise_sum(values, half) + numpy_pairwise_sum(values + half, n - half);
}

void check_spec(const std::vector<int32_t>& sizes, const GptSampleSpec& spec) {
  if (spec.seq_length < 2)
    fail(kIndexWhere, "seq_length is " + std::to_string(spec.seq_length) + "; it must be at least 2");
  if (spec.documents.empty()) fail(kIndexWhere, "the split has no documents");
  for (const int32_t document : spec.documents)
    if (document < 0 || static_cast<size_t>(document) >= sizes.size())
      fail(kIndexWhere, "document " + std::to_string(document) + " is outside the dataset's " +
                            std::to_string(sizes.size()) + " sequences");
}

}  // namespace

int64_t count_tokens(const std::vector<int32_t>& sizes, const std::vector<int32_t>& documents) {
  int64_t tokens = 0;
  for (const int32_t document : documents) tokens += sizes.at(static_cast<size_t>(document));
  return tokens;
}

EpochPlan plan_epochs(int64_t tokens_per_epoch, int32_t seq_length, int64_t num_samples, int32_t extra_token) {
  if (tokens_per_epoch < 2)
    fail(kIndexWhere, "the split has " + std::to_string(tokens_per_epoch) + " tokens; it needs at least 2");
  EpochPlan plan;
  int64_t total_tokens = 0;
  do {
    if (plan.num_epochs == kInt32Max) fail(kIndexWhere, "more epochs than an int32 counts");
    ++plan.num_epochs;
    total_tokens += tokens_per_epoch;
    // The extra token of a sample overlaps the next sample's first, except for the last sample's.
  } while ((total_tokens - extra_token) / seq_length < num_samples);
  if (plan.num_epochs == 1) return plan;
  // The last epoch is shuffled on its own when less than 80% of it is used, so that its samples do not crowd
  // into the end of a global shuffle.
  plan.samples_before_last_epoch = ((plan.num_epochs - 1) * tokens_per_epoch - extra_token) / seq_length;
  const int64_t last_epoch_samples = num_samples - plan.samples_before_last_epoch;
  const int64_t samples_per_epoch = (tokens_per_epoch - extra_token) / seq_length;
  plan.separate_last_epoch = last_epoch_samples < static_cast<int64_t>(0.80 * static_cast<double>(samples_per_epoch));
  return plan;
}

std::vector<int32_t> build_doc_idx(const std::vector<int32_t>& documents, int32_t num_epochs) {
  if (static_cast<int64_t>(documents.size()) * num_epochs > kInt32Max)
    fail(kIndexWhere, std::to_string(num_epochs) + " epochs of " + std::to_string(documents.size()) +
                          " documents are more positions than sample_idx's int32 fields address");
  std::vector<int32_t> doc_idx;
  doc_idx.reserve(documents.size() * static_cast<size_t>(num_epochs));
  for (int32_t epoch = 0; epoch < num_epochs; ++epoch)
    doc_idx.insert(doc_idx.end(), documents.begin(), documents.end());
  return doc_idx;
}

std::vector<SampleStart> build_sample_idx(const std::vector<int32_t>& sizes, const std::vector<int32_t>& doc_idx,
                                          int32_t seq_length, int32_t num_epochs, int64_t tokens_per_epoch,
                                          bool keep_last_sequence, int32_t extra_token) {
  const int64_t usable_tokens = num_epochs * tokens_per_epoch - extra_token;
  // helpers.cpp rounds up in single precision (`ceil(float(...) / seq_length)`); kept for the same count.
  const int64_t num_samples =
      keep_last_sequence
          ? static_cast<int64_t>(std::ceil(static_cast<float>(usable_tokens) / static_cast<float>(seq_length)))
          : usable_tokens / seq_length;
  std::vector<SampleStart> rows;
  rows.reserve(static_cast<size_t>(num_samples) + 1);
  rows.push_back({0, 0});
  const int64_t last_position = static_cast<int64_t>(doc_idx.size()) - 1;
  int64_t position = 0;
  int32_t offset = 0;
  while (static_cast<int64_t>(rows.size()) <= num_samples) {
    int32_t remaining = seq_length + extra_token;
    while (remaining != 0) {
      const int32_t document_length = sizes[static_cast<size_t>(doc_idx[static_cast<size_t>(position)])] - offset;
      remaining -= document_length;
      if (remaining <= 0) {  // the sample ends inside this document
        offset += remaining + document_length - extra_token;
        remaining = 0;
      } else if (position == last_position) {  // only the kept short last sample runs out of documents
        if (static_cast<int64_t>(rows.size()) != num_samples)
          fail(kIndexWhere, "the documents ran out at sample " + std::to_string(rows.size()) + " of " +
                                std::to_string(num_samples) + " (helpers.cpp asserts here too)");
        offset = document_length + offset - extra_token;
        break;
      } else {
        ++position;
        offset = 0;
      }
    }
    rows.push_back({static_cast<int32_t>(position), offset});
  }
  return rows;
}

std::vector<int64_t> build_shuffle_idx(int64_t first_part, int64_t total, NumpyRandomState& random) {
  std::vector<int64_t> shuffle_idx(static_cast<size_t>(total));
  std::iota(shuffle_idx.begin(), shuffle_idx.end(), int64_t{0});
  random.shuffle(shuffle_idx.data(), static_cast<size_t>(first_part));
  if (first_part < total) random.shuffle(shuffle_idx.data() + first_part, static_cast<size_t>(total - first_part));
  return shuffle_idx;
}

GptSampleIndex build_gpt_sample_index(const std::vector<int32_t>& sizes, const GptSampleSpec& spec) {
  check_spec(sizes, spec);
  const int32_t extra_token = spec.seq_len_plus_one_tokens ? 1 : 0;
  GptSampleIndex index;
  index.tokens_per_epoch = count_tokens(sizes, spec.documents);
  index.epochs = plan_epochs(index.tokens_per_epoch, spec.seq_length, spec.num_samples, extra_token);
  NumpyRandomState random(spec.seed);  // drawn from only by the shuffle index: the document shuffle is off
  index.doc_idx = build_doc_idx(spec.documents, index.epochs.num_epochs);
  index.sample_idx = build_sample_idx(sizes, index.doc_idx, spec.seq_length, index.epochs.num_epochs,
                                      index.tokens_per_epoch, spec.num_samples < 0, extra_token);
  const int64_t total = static_cast<int64_t>(index.sample_idx.size()) - 1;
  const int64_t first_part = index.epochs.separate_last_epoch ? index.epochs.samples_before_last_epoch : total;
  index.shuffle_idx = build_shuffle_idx(first_part, total, random);
  return index;
}

// ---- GptSamples ----

GptSamples::GptSamples(std::shared_ptr<const IndexedDataset> dataset, GptSampleSpec spec)
    : dataset_(std::move(dataset)), spec_(std::move(spec)) {
  try {
    index_ = build_gpt_sample_index(dataset_->sizes(), spec_);
  } catch (const Error& error) {
    fail(dataset_->prefix(), error.what());
  }
}

void GptSamples::sample(int64_t i, int32_t* out) const {
  if (i < 0 || i >= size())
    fail(dataset_->prefix(),
         "GPT sample " + std::to_string(i) + " does not exist (there are " + std::to_string(size()) + ")");
  const int64_t shuffled = index_.shuffle_idx[static_cast<size_t>(i)];
  const SampleStart first = index_.sample_idx[static_cast<size_t>(shuffled)];
  const SampleStart last = index_.sample_idx[static_cast<size_t>(shuffled) + 1];
  const int32_t extra_token = spec_.seq_len_plus_one_tokens ? 1 : 0;
  const auto sequence = [&](int32_t position) { return index_.doc_idx[static_cast<size_t>(position)]; };
  int64_t written = 0;
  if (first.doc_position == last.doc_position) {
    written = last.offset - first.offset + extra_token;
    dataset_->read(sequence(first.doc_position), first.offset, written, out);
  } else {
    // The rest of the first document, the documents between whole, the start of the last.
    const int32_t first_sequence = sequence(first.doc_position);
    written = dataset_->sizes()[static_cast<size_t>(first_sequence)] - first.offset;
    dataset_->read(first_sequence, first.offset, written, out);
    for (int32_t position = first.doc_position + 1; position < last.doc_position; ++position) {
      const int32_t between = sequence(position);
      const int64_t length = dataset_->sizes()[static_cast<size_t>(between)];
      if (written + length > sample_length()) fail(dataset_->prefix(), "GPT sample index overruns a sample");
      dataset_->read(between, 0, length, out + written);
      written += length;
    }
    const int64_t length = last.offset + extra_token;
    if (written + length > sample_length()) fail(dataset_->prefix(), "GPT sample index overruns a sample");
    dataset_->read(sequence(last.doc_position), 0, length, out + written);
    written += length;
  }
  // Only the kept short last sample of a whole-set index ends early; GPTDataset pads it with -1.
  for (int64_t t = written; t < sample_length(); ++t) out[t] = -1;
}

std::vector<int32_t> GptSamples::sample(int64_t i) const {
  std::vector<int32_t> tokens(static_cast<size_t>(sample_length()));
  sample(i, tokens.data());
  return tokens;
}

// ---- the blend ----

std::vector<double> normalized_blend_weights(const std::vector<double>& weights) {
  if (weights.empty()) fail(kBlendWhere, "no datasets to blend");
  double sum = 0.0;
  for (const double weight : weights) {
    if (!(weight >= 0.0) || !std::isfinite(weight))
      fail(kBlendWhere, "weight " + std::to_string(weight) + " is not a finite non-negative number");
    sum += weight;
  }
  if (!(sum > 0.0)) fail(kBlendWhere, "the weights add up to 0");
  std::vector<double> normalized;
  for (const double weight : weights) normalized.push_back(weight / sum);
  return normalized;
}

std::vector<int64_t> blend_num_samples(const std::vector<double>& weights, int64_t num_samples) {
  std::vector<int64_t> per_dataset;
  for (const double weight : normalized_blend_weights(weights))
    per_dataset.push_back(static_cast<int64_t>(std::ceil(static_cast<double>(num_samples) * weight * 1.005)));
  return per_dataset;
}

BlendingIndices blending_indices(const std::vector<double>& weights, int64_t size) {
  std::vector<double> normalized = normalized_blend_weights(weights);
  if (normalized.size() >= 255) fail(kBlendWhere, "blends at most 254 datasets (their numbers are uint8)");
  const double sum = numpy_pairwise_sum(normalized.data(), normalized.size());  // BlendableDataset's own pass
  for (double& weight : normalized) weight /= sum;
  BlendingIndices indices;
  indices.dataset_index.resize(static_cast<size_t>(size));
  indices.dataset_sample_index.resize(static_cast<size_t>(size));
  std::vector<int64_t> taken(normalized.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    // The dataset furthest behind its share so far (the first of equals); sample 0 counts as 1.
    const double position = std::max(static_cast<double>(i), 1.0);
    size_t behind_most = 0;
    double largest_error = normalized[0] * position - static_cast<double>(taken[0]);
    for (size_t d = 1; d < normalized.size(); ++d) {
      const double error = normalized[d] * position - static_cast<double>(taken[d]);
      if (error > largest_error) {
        largest_error = error;
        behind_most = d;
      }
    }
    indices.dataset_index[static_cast<size_t>(i)] = static_cast<uint8_t>(behind_most);
    indices.dataset_sample_index[static_cast<size_t>(i)] = taken[behind_most]++;
  }
  return indices;
}

BlendedSamples::BlendedSamples(std::vector<std::shared_ptr<const GptSamples>> datasets,
                               const std::vector<double>& weights)
    : datasets_(std::move(datasets)) {
  if (datasets_.empty() || datasets_.size() != weights.size())
    fail(kBlendWhere, std::to_string(datasets_.size()) + " datasets but " + std::to_string(weights.size()) +
                          " weights; a blend needs one weight per dataset");
  int64_t size = 0;
  for (const auto& dataset : datasets_) {
    if (dataset->sample_length() != sample_length())
      fail(kBlendWhere, "datasets of samples of " + std::to_string(dataset->sample_length()) + " and " +
                            std::to_string(sample_length()) + " tokens cannot be blended");
    size += dataset->size();
  }
  indices_ = blending_indices(weights, size);
}

void BlendedSamples::sample(int64_t i, int32_t* out) const {
  if (i < 0 || i >= size())
    fail(kBlendWhere, "sample " + std::to_string(i) + " does not exist (there are " + std::to_string(size()) + ")");
  const size_t dataset = indices_.dataset_index[static_cast<size_t>(i)];
  datasets_[dataset]->sample(indices_.dataset_sample_index[static_cast<size_t>(i)], out);
}

std::vector<int32_t> BlendedSamples::sample(int64_t i) const {
  std::vector<int32_t> tokens(static_cast<size_t>(sample_length()));
  sample(i, tokens.data());
  return tokens;
}

}  // namespace trainbench::data
