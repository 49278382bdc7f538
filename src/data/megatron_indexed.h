#pragma once
// Megatron-LM's memory-mapped indexed dataset (megatron/data/indexed_dataset.py, MMapIndexedDataset), the
// format GPT-3's C4 shards are published in: PREFIX.bin holds every sequence's tokens back to back, PREFIX.idx
// describes them. The .idx, all little-endian:
//   magic "MMIDIDX\0\0" (9 bytes), version u64 = 1, dtype code u8, sequence count u64 N, document count u64 D,
//   sizes int32[N] (tokens per sequence), pointers int64[N] (byte offset of each sequence in the .bin),
//   doc_idx int64[D] (the first sequence of each document, starting at 0 and ending at N).
// GPT treats every sequence as a document (the C4 preprocessing writes one sequence per document), so
// gpt_samples.h addresses sequences. Plain C++, no LibTorch.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trainbench {
class AtomicFile;
}

namespace trainbench::data {

// Megatron's dtype codes (indexed_dataset.py's `dtypes`). Code 6 is Python's `float`, which the reference's own
// reader cannot open (`float().itemsize` does not exist), so it is refused; 7 is numpy's double.
enum class TokenType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 7,
  kUint16 = 8,
};

// The numpy name ("uint16") and the bytes per token.
std::string token_type_name(TokenType type);
int64_t token_type_bytes(TokenType type);

// What Megatron and NeMo write a vocabulary of this size in: uint16 below 65500 tokens, else int32.
TokenType best_token_type(int64_t vocab_size);

class MappedFile;

// Reads PREFIX.idx and PREFIX.bin. The constructor checks the whole index before anything is read (magic,
// version, dtype code, that the .idx is exactly as long as its counts say, sizes and pointers laid out back to
// back, the .bin exactly as long as they say, doc_idx rising from 0 to the sequence count) and throws Error
// naming the file and what was expected. The .bin stays memory-mapped; reads convert tokens to int32.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(IndexedDataset&&) noexcept;
  IndexedDataset& operator=(IndexedDataset&&) noexcept;

  const std::string& prefix() const { return prefix_; }
  TokenType token_type() const { return token_type_; }
  int64_t num_sequences() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(document_index_.size()) - 1; }
  // Tokens per sequence (the index's `sizes`).
  const std::vector<int32_t>& sizes() const { return sizes_; }
  // The index's `doc_idx`: document d is sequences [document_index()[d], document_index()[d + 1]).
  const std::vector<int64_t>& document_index() const { return document_index_; }

  // Tokens [offset, offset + length) of one sequence into `out`, as MMapIndexedDataset.get(sequence, offset,
  // length) reads them. Throws Error naming the .bin when the range is outside the sequence or a stored value
  // is not a token id (negative, fractional or beyond int32).
  void read(int64_t sequence, int64_t offset, int64_t length, int32_t* out) const;
  std::vector<int32_t> read(int64_t sequence, int64_t offset, int64_t length) const;
  std::vector<int32_t> read(int64_t sequence) const;

 private:
  void read_index(const std::string& path);
  void check_layout(const std::string& path) const;

  std::string prefix_;
  TokenType token_type_ = TokenType::kInt32;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> pointers_;
  std::vector<int64_t> document_index_;
  std::unique_ptr<MappedFile> bin_;
};

// Writes PREFIX.bin and PREFIX.idx as MMapIndexedDatasetBuilder does, one sequence per document (what NeMo's
// preprocess_data_for_megatron.py writes without sentence splitting). Both files grow as .partial files;
// finish() moves them into place (a previous PREFIX.idx is removed first, so a crash cannot pair an old index
// with a new .bin). A writer destroyed before finish(), or whose finish() fails, leaves nothing behind.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(std::string prefix, TokenType type);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Appends one document. Throws Error naming the document (its number from 0) and the token when a token is
  // negative or does not fit the dtype; nothing of that document is written then.
  void add_document(const std::vector<int32_t>& tokens);
  void finish();

  int64_t num_documents() const { return static_cast<int64_t>(sizes_.size()); }

 private:
  void flush_buffer();
  void remove_partial_files();

  std::string prefix_;
  TokenType token_type_;
  std::vector<int32_t> sizes_;
  std::string buffer_;  // encoded tokens not yet handed to the .bin file
  std::unique_ptr<AtomicFile> bin_file_;
  bool finished_ = false;
};

}  // namespace trainbench::data
