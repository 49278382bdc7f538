#include "data/megatron_indexed.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <sys/mman.h>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .idx and .bin are little-endian and read in place");

namespace trainbench::data {

namespace {

constexpr char kMagic[] = "MMIDIDX\0\0";  // 9 bytes; the literal's own terminator is the tenth
constexpr size_t kMagicBytes = 9;
constexpr uint64_t kVersion = 1;
constexpr int64_t kHeaderBytes = kMagicBytes + 8 + 1 + 8 + 8;  // magic, version, dtype, N, D
constexpr int32_t kMaxTokenId = std::numeric_limits<int32_t>::max();

template <typename T>
T load(const uint8_t* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof value);  // the .idx arrays start at byte 34: not aligned
  return value;
}

template <typename T>
void append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

bool is_known_code(uint8_t code) {
  switch (static_cast<TokenType>(code)) {
    case TokenType::kUint8:
    case TokenType::kInt8:
    case TokenType::kInt16:
    case TokenType::kInt32:
    case TokenType::kInt64:
    case TokenType::kFloat64:
    case TokenType::kUint16:
      return true;
  }
  return false;
}

// The largest token id a dtype can hold (ids are non-negative and read back as int32).
int64_t max_token(TokenType type) {
  switch (type) {
    case TokenType::kUint8:
      return 255;
    case TokenType::kInt8:
      return 127;
    case TokenType::kInt16:
      return 32767;
    case TokenType::kUint16:
      return 65535;
    default:
      return kMaxTokenId;
  }
}

// Whether a stored value is a token id: whole, non-negative, within int32.
template <typename Stored>
bool is_token_id(Stored value) {
  if constexpr (std::is_floating_point_v<Stored>) {
    return value >= 0 && value <= kMaxTokenId && std::floor(value) == value;  // NaN fails every comparison
  } else if constexpr (std::is_signed_v<Stored>) {
    return value >= 0 && static_cast<int64_t>(value) <= kMaxTokenId;
  } else {
    return static_cast<uint64_t>(value) <= static_cast<uint64_t>(kMaxTokenId);
  }
}

// Converts `count` stored tokens; returns the position of the first value that is not a token id, or -1.
template <typename Stored>
int64_t convert_tokens(const uint8_t* bytes, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const Stored value = load<Stored>(bytes + i * static_cast<int64_t>(sizeof(Stored)));
    if (!is_token_id(value)) return i;
    out[i] = static_cast<int32_t>(value);
  }
  return -1;
}

// Converts from the stored dtype; returns the position of the first value that is not a token id, or -1.
int64_t convert_stored_tokens(TokenType type, const uint8_t* bytes, int64_t count, int32_t* out) {
  switch (type) {
    case TokenType::kUint8:
      return convert_tokens<uint8_t>(bytes, count, out);
    case TokenType::kInt8:
      return convert_tokens<int8_t>(bytes, count, out);
    case TokenType::kInt16:
      return convert_tokens<int16_t>(bytes, count, out);
    case TokenType::kInt32:
      return convert_tokens<int32_t>(bytes, count, out);
    case TokenType::kInt64:
      return convert_tokens<int64_t>(bytes, count, out);
    case TokenType::kFloat64:
      return convert_tokens<double>(bytes, count, out);
    case TokenType::kUint16:
      return convert_tokens<uint16_t>(bytes, count, out);
  }
  return 0;
}

std::string stored_value_text(TokenType type, const uint8_t* bytes) {
  switch (type) {
    case TokenType::kUint8:
      return std::to_string(load<uint8_t>(bytes));
    case TokenType::kInt8:
      return std::to_string(load<int8_t>(bytes));
    case TokenType::kInt16:
      return std::to_string(load<int16_t>(bytes));
    case TokenType::kInt32:
      return std::to_string(load<int32_t>(bytes));
    case TokenType::kInt64:
      return std::to_string(load<int64_t>(bytes));
    case TokenType::kFloat64:
      return std::to_string(load<double>(bytes));
    case TokenType::kUint16:
      return std::to_string(load<uint16_t>(bytes));
  }
  return "?";
}

void encode_tokens(TokenType type, const std::vector<int32_t>& tokens, std::string& out) {
  for (const int32_t token : tokens) {
    switch (type) {
      case TokenType::kUint8:
        append(out, static_cast<uint8_t>(token));
        break;
      case TokenType::kInt8:
        append(out, static_cast<int8_t>(token));
        break;
      case TokenType::kInt16:
        append(out, static_cast<int16_t>(token));
        break;
      case TokenType::kInt32:
        append(out, token);
        break;
      case TokenType::kInt64:
        append(out, static_cast<int64_t>(token));
        break;
      case TokenType::kFloat64:
        append(out, static_cast<double>(token));
        break;
      case TokenType::kUint16:
        append(out, static_cast<uint16_t>(token));
        break;
    }
  }
}

// The index as MMapIndexedDataset.Index.writer writes it, one sequence per document.
std::string encode_index(TokenType type, const std::vector<int32_t>& sizes) {
  std::string index(kMagic, kMagicBytes);
  append(index, kVersion);
  append(index, static_cast<uint8_t>(type));
  append(index, static_cast<uint64_t>(sizes.size()));
  append(index, static_cast<uint64_t>(sizes.size() + 1));
  index.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int32_t));
  int64_t address = 0;
  for (const int32_t size : sizes) {
    append(index, address);
    address += size * token_type_bytes(type);
  }
  for (int64_t document = 0; document <= static_cast<int64_t>(sizes.size()); ++document) append(index, document);
  return index;
}

void remove_quietly(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

}  // namespace

// A read-only mapping of a whole file (none for an empty file, which mmap refuses).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
    struct stat status {};
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
      ::close(fd);
      fail(path, "is not a regular file");
    }
    size_ = static_cast<int64_t>(status.st_size);
    if (size_ > 0) {
      void* mapping = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_SHARED, fd, 0);
      const int map_errno = errno;
      ::close(fd);
      if (mapping == MAP_FAILED) fail(path, std::string("cannot memory-map: ") + std::strerror(map_errno));
      data_ = static_cast<const uint8_t*>(mapping);
    } else {
      ::close(fd);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

std::string token_type_name(TokenType type) {
  switch (type) {
    case TokenType::kUint8:
      return "uint8";
    case TokenType::kInt8:
      return "int8";
    case TokenType::kInt16:
      return "int16";
    case TokenType::kInt32:
      return "int32";
    case TokenType::kInt64:
      return "int64";
    case TokenType::kFloat64:
      return "float64";
    case TokenType::kUint16:
      return "uint16";
  }
  return "dtype code " + std::to_string(static_cast<int>(type));
}

int64_t token_type_bytes(TokenType type) {
  switch (type) {
    case TokenType::kUint8:
    case TokenType::kInt8:
      return 1;
    case TokenType::kInt16:
    case TokenType::kUint16:
      return 2;
    case TokenType::kInt32:
      return 4;
    case TokenType::kInt64:
    case TokenType::kFloat64:
      return 8;
  }
  return 0;
}

TokenType best_token_type(int64_t vocab_size) { return vocab_size < 65500 ? TokenType::kUint16 : TokenType::kInt32; }

// ---- reader ----

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  read_index(prefix + ".idx");
  bin_ = std::make_unique<MappedFile>(prefix + ".bin");
  check_layout(prefix + ".idx");
}

IndexedDataset::~IndexedDataset() = default;
IndexedDataset::IndexedDataset(IndexedDataset&&) noexcept = default;
IndexedDataset& IndexedDataset::operator=(IndexedDataset&&) noexcept = default;

void IndexedDataset::read_index(const std::string& path) {
  const MappedFile index(path);
  const uint8_t* bytes = index.data();
  if (index.size() < static_cast<int64_t>(kMagicBytes) || std::memcmp(bytes, kMagic, kMagicBytes) != 0)
    fail(path,
         "does not start with MMIDIDX\\x00\\x00, the magic of Megatron's mmap indexed dataset (a 'lazy' or "
         "'cached' index starts with TNTIDX; anything else is not a Megatron index)");
  if (index.size() < kHeaderBytes)
    fail(path, "is " + std::to_string(index.size()) + " bytes, shorter than the " + std::to_string(kHeaderBytes) +
                   "-byte header (truncated)");
  const uint64_t version = load<uint64_t>(bytes + kMagicBytes);
  if (version != kVersion) fail(path, "has index version " + std::to_string(version) + "; only version 1 exists");
  const uint8_t code = bytes[kMagicBytes + 8];
  if (!is_known_code(code))
    fail(path, "has dtype code " + std::to_string(code) +
                   "; expected one of Megatron's 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 7 float64, 8 uint16 "
                   "(6, Python's float, cannot be opened by the reference's own reader either)");
  token_type_ = static_cast<TokenType>(code);
  const uint64_t count = load<uint64_t>(bytes + kMagicBytes + 9);
  const uint64_t documents = load<uint64_t>(bytes + kMagicBytes + 17);
  constexpr uint64_t kCountLimit = uint64_t{1} << 40;  // beyond any file; keeps the size arithmetic exact
  const auto expected = count > kCountLimit || documents > kCountLimit
                            ? std::numeric_limits<int64_t>::max()
                            : kHeaderBytes + static_cast<int64_t>(count * 12 + documents * 8);
  if (index.size() != expected)
    fail(path, "is " + std::to_string(index.size()) + " bytes, but its header (" + std::to_string(count) +
                   " sequences, " + std::to_string(documents) + " document boundaries) says exactly " +
                   (expected == std::numeric_limits<int64_t>::max() ? "more than any file" : std::to_string(expected)) +
                   (index.size() < expected ? " (truncated)" : " (trailing bytes)"));
  sizes_.resize(count);
  pointers_.resize(count);
  document_index_.resize(documents);
  const uint8_t* cursor = bytes + kHeaderBytes;
  if (count > 0) std::memcpy(sizes_.data(), cursor, count * sizeof(int32_t));
  cursor += count * sizeof(int32_t);
  if (count > 0) std::memcpy(pointers_.data(), cursor, count * sizeof(int64_t));
  cursor += count * sizeof(int64_t);
  if (documents > 0) std::memcpy(document_index_.data(), cursor, documents * sizeof(int64_t));
}

// Sizes and pointers as MMapIndexedDatasetBuilder lays them out (back to back from byte 0), the .bin exactly
// as long as they add up to, and doc_idx rising from 0 to the sequence count.
void IndexedDataset::check_layout(const std::string& path) const {
  const int64_t item_bytes = token_type_bytes(token_type_);
  int64_t address = 0;
  for (size_t i = 0; i < sizes_.size(); ++i) {
    if (sizes_[i] < 0) fail(path, "sequence " + std::to_string(i) + " has negative size " + std::to_string(sizes_[i]));
    if (pointers_[i] != address)
      fail(path, "sequence " + std::to_string(i) + " starts at byte " + std::to_string(pointers_[i]) +
                     " of the .bin, but the sizes before it put it at byte " + std::to_string(address));
    address += sizes_[i] * item_bytes;
  }
  if (bin_->size() != address)
    fail(prefix_ + ".bin", "is " + std::to_string(bin_->size()) + " bytes, but its index " + path + " says exactly " +
                               std::to_string(address) + " (" + std::to_string(sizes_.size()) + " sequences of " +
                               token_type_name(token_type_) + ")" +
                               (bin_->size() < address ? "; the .bin is truncated" : "; they do not belong together"));
  const int64_t count = num_sequences();
  if (document_index_.empty() || document_index_.front() != 0 || document_index_.back() != count)
    fail(path, "doc_idx must start at 0 and end at the sequence count " + std::to_string(count) + "; it " +
                   (document_index_.empty() ? std::string("is empty")
                                            : "runs from " + std::to_string(document_index_.front()) + " to " +
                                                  std::to_string(document_index_.back())));
  for (size_t d = 1; d < document_index_.size(); ++d)
    if (document_index_[d] < document_index_[d - 1])
      fail(path, "doc_idx falls from " + std::to_string(document_index_[d - 1]) + " to " +
                     std::to_string(document_index_[d]) + " at document " + std::to_string(d) + "; it must not fall");
}

void IndexedDataset::read(int64_t sequence, int64_t offset, int64_t length, int32_t* out) const {
  const std::string bin_path = prefix_ + ".bin";
  if (sequence < 0 || sequence >= num_sequences())
    fail(bin_path,
         "has no sequence " + std::to_string(sequence) + " (it holds " + std::to_string(num_sequences()) + ")");
  const int64_t size = sizes_[static_cast<size_t>(sequence)];
  if (offset < 0 || length < 0 || offset > size || length > size - offset)
    fail(bin_path, "tokens [" + std::to_string(offset) + ", " + std::to_string(offset + length) +
                       ") are outside sequence " + std::to_string(sequence) + " of " + std::to_string(size) +
                       " tokens");
  if (length == 0) return;
  const int64_t item_bytes = token_type_bytes(token_type_);
  const uint8_t* bytes = bin_->data() + pointers_[static_cast<size_t>(sequence)] + offset * item_bytes;
  const int64_t bad = convert_stored_tokens(token_type_, bytes, length, out);
  if (bad >= 0)
    fail(bin_path, "sequence " + std::to_string(sequence) + " holds " +
                       stored_value_text(token_type_, bytes + bad * item_bytes) + " at token " +
                       std::to_string(offset + bad) + ", which is not a token id (a whole number in 0.." +
                       std::to_string(kMaxTokenId) + ")");
}

std::vector<int32_t> IndexedDataset::read(int64_t sequence, int64_t offset, int64_t length) const {
  std::vector<int32_t> tokens(static_cast<size_t>(std::max<int64_t>(length, 0)));
  read(sequence, offset, length, tokens.data());
  return tokens;
}

std::vector<int32_t> IndexedDataset::read(int64_t sequence) const {
  const int64_t size = sequence >= 0 && sequence < num_sequences() ? sizes_[static_cast<size_t>(sequence)] : 0;
  return read(sequence, 0, size);
}

// ---- writer ----

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenType type)
    : prefix_(std::move(prefix)), token_type_(type) {
  if (!is_known_code(static_cast<uint8_t>(type)) || type == TokenType::kFloat64)
    fail(prefix_ + ".bin", "tokens are written as integers; " + token_type_name(type) + " is not an integer dtype");
  bin_file_ = std::make_unique<AtomicFile>(prefix_ + ".bin");
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finished_) remove_partial_files();
}

void IndexedDatasetWriter::add_document(const std::vector<int32_t>& tokens) {
  if (finished_) fail(prefix_ + ".bin", "add_document after finish()");
  const int64_t limit = max_token(token_type_);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] > limit)
      fail(prefix_ + ".bin", "document " + std::to_string(sizes_.size()) + " has token " + std::to_string(tokens[i]) +
                                 " at position " + std::to_string(i) + ", which does not fit " +
                                 token_type_name(token_type_) + " token ids (0.." + std::to_string(limit) + ")");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail(prefix_ + ".bin", "document " + std::to_string(sizes_.size()) + " has more tokens than int32 sizes hold");
  encode_tokens(token_type_, tokens, buffer_);
  sizes_.push_back(static_cast<int32_t>(tokens.size()));
  constexpr size_t kFlushBytes = size_t{1} << 20;  // AtomicFile flushes every write: hand it large pieces
  if (buffer_.size() >= kFlushBytes) flush_buffer();
}

void IndexedDatasetWriter::flush_buffer() {
  bin_file_->write(buffer_);
  buffer_.clear();
}

void IndexedDatasetWriter::finish() {
  if (finished_) return;
  const std::string bin_path = prefix_ + ".bin";
  const std::string index_path = prefix_ + ".idx";
  bool bin_committed = false;
  try {
    flush_buffer();
    AtomicFile index(index_path);
    index.write(encode_index(token_type_, sizes_));
    remove_quietly(index_path);  // an old index must never describe the new .bin
    bin_file_->commit();
    bin_committed = true;
    index.commit();
  } catch (...) {
    remove_partial_files();
    if (bin_committed) remove_quietly(bin_path);
    finished_ = true;
    throw;
  }
  finished_ = true;
}

void IndexedDatasetWriter::remove_partial_files() {
  bin_file_.reset();  // closes the .bin's partial file
  remove_quietly(AtomicFile::partial_path_for(prefix_ + ".bin"));
  remove_quietly(AtomicFile::partial_path_for(prefix_ + ".idx"));
}

}  // namespace trainbench::data
