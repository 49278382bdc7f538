#include "data/generators/gpt3_text.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <thread>

#include "data/megatron_indexed.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/file_digest.h"
#include "util/json_limits.h"

extern char** environ;

namespace trainbench::data {

namespace fs = std::filesystem;

// ---- The SentencePiece model file ----

namespace {

// Protobuf's wire format, as much as walking a ModelProto's top-level fields needs.
class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& where)
      : at_(bytes.data()), end_(at_ + bytes.size()), where_(where) {}
  bool done() const { return at_ >= end_; }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= end_) fail(where_, "not a SentencePiece model (truncated protobuf)");
      const auto byte = static_cast<uint8_t>(*at_++);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    fail(where_, "not a SentencePiece model (malformed protobuf)");
  }
  std::string_view bytes() {
    const uint64_t size = varint();
    if (size > static_cast<uint64_t>(end_ - at_)) fail(where_, "not a SentencePiece model (truncated protobuf)");
    const std::string_view view(at_, size);
    at_ += size;
    return view;
  }
  // Passes over a field's value of any wire type but the length-delimited one, which bytes() reads.
  void skip(int wire_type) {
    const int64_t widths[] = {0, 8, -1, -1, -1, 4};
    if (wire_type == 0) {
      varint();
    } else if (wire_type == 1 || wire_type == 5) {
      if (end_ - at_ < widths[wire_type]) fail(where_, "not a SentencePiece model (truncated protobuf)");
      at_ += widths[wire_type];
    } else {
      fail(where_, "not a SentencePiece model (unexpected protobuf wire type " + std::to_string(wire_type) + ")");
    }
  }

 private:
  const char* at_;
  const char* end_;
  std::string where_;
};

// NormalizerSpec.name (field 1).
std::string normalizer_name(std::string_view spec, const std::string& where) {
  WireReader reader(spec, where);
  std::string name;
  while (!reader.done()) {
    const uint64_t key = reader.varint();
    if ((key & 7) != 2) {
      reader.skip(static_cast<int>(key & 7));
      continue;
    }
    const std::string_view value = reader.bytes();
    if ((key >> 3) == 1) name = std::string(value);
  }
  return name;
}

}  // namespace

bool SentencePieceModelInfo::newline_is_space() const { return normalizer.rfind("nmt_nfkc", 0) == 0; }

SentencePieceModelInfo read_sentencepiece_model_info(const std::string& model_path) {
  if (!fs::is_regular_file(model_path)) fail(model_path, "no such SentencePiece model file");
  const std::string bytes = read_file(model_path);
  WireReader reader(bytes, model_path);
  SentencePieceModelInfo info;
  while (!reader.done()) {
    const uint64_t key = reader.varint();
    if ((key & 7) != 2) {
      reader.skip(static_cast<int>(key & 7));
      continue;
    }
    const std::string_view value = reader.bytes();
    if ((key >> 3) == 1) ++info.vocab_size;  // ModelProto.pieces
    if ((key >> 3) == 3) info.normalizer = normalizer_name(value, model_path);
  }
  if (info.vocab_size == 0) fail(model_path, "not a SentencePiece model (it has no pieces)");
  return info;
}

// ---- spm_encode as a child process ----

namespace {

// spm_encode with its standard input a socket (so that writing to a child that died is an EPIPE error, not a
// SIGPIPE that ends this process), its output a pipe and its messages a file for the error report.
class SpmEncodeChild {
 public:
  explicit SpmEncodeChild(const std::string& model_path) {
    errors_ = messages_file();
    int input[2] = {-1, -1}, output[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, input) != 0 || ::pipe2(output, O_CLOEXEC) != 0) {
      const int error = errno;
      close_all({input[0], input[1], errors_});
      fail("spm_encode", std::string("cannot make its pipes: ") + std::strerror(error));
    }
    to_child_ = input[0];
    from_child_ = output[0];
    const int started = spawn(model_path, input[1], output[1]);
    close_all({input[1], output[1]});
    if (started != 0) {
      close_all({to_child_, from_child_, errors_});
      fail("spm_encode", std::string("cannot start it (") + std::strerror(started) +
                             "); it is in Debian's package sentencepiece (scripts/install-deps.sh)");
    }
  }
  ~SpmEncodeChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    close_all({to_child_, from_child_, errors_});
  }
  SpmEncodeChild(const SpmEncodeChild&) = delete;
  SpmEncodeChild& operator=(const SpmEncodeChild&) = delete;

  int to_child() const { return to_child_; }
  int from_child() const { return from_child_; }
  void stop() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  }
  // The exit status (-1 for a signal); the child is reaped once.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The end of what the child wrote to its standard error.
  std::string messages() const {
    std::string text(2000, '\0');
    const off_t size = ::lseek(errors_, 0, SEEK_END);
    const off_t from = std::max<off_t>(0, size - static_cast<off_t>(text.size()));
    const ssize_t got = ::pread(errors_, text.data(), text.size(), from);
    text.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return text;
  }

 private:
  static void close_all(std::initializer_list<int> fds) {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }

  // Starts spm_encode reading `input` and writing `output`; posix_spawnp's error number, 0 when it started.
  int spawn(const std::string& model_path, int input, int output) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, input, 0);
    posix_spawn_file_actions_adddup2(&actions, output, 1);
    posix_spawn_file_actions_adddup2(&actions, errors_, 2);
    std::vector<std::string> arguments = {"spm_encode", "--model=" + model_path, "--output_format=id"};
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    const int started = ::posix_spawnp(&pid_, "spm_encode", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (started != 0) pid_ = -1;
    return started;
  }

  // An unlinked temporary file: nothing is left behind whatever happens.
  static int messages_file() {
    std::string path = (fs::temp_directory_path() / "trainbench-spm-encode-XXXXXX").string();
    const int fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot create: ") + std::strerror(errno));
    ::unlink(path.c_str());
    return fd;
  }

  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1, errors_ = -1;
};

// False when the child no longer reads (it exited or was stopped).
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data.remove_prefix(static_cast<size_t>(sent));
  }
  return true;
}

// One output line of `spm_encode --output_format=id`: ids separated by single spaces.
void parse_ids(std::string_view line, int64_t line_number, std::vector<int32_t>& ids) {
  ids.clear();
  const char* at = line.data();
  const char* const end = at + line.size();
  while (at < end) {
    int32_t id = 0;
    const auto [next, error] = std::from_chars(at, end, id);
    if (error != std::errc() || id < 0 || (next < end && *next != ' '))
      fail("spm_encode",
           "unexpected output on line " + std::to_string(line_number) + ": " + std::string(line.substr(0, 80)));
    ids.push_back(id);
    at = next < end ? next + 1 : end;
  }
}

// Reads the child's output lines until it closes it, handing each line's ids to `on_ids`; returns the count.
int64_t read_id_lines(int fd, const std::function<void(std::vector<int32_t>&)>& on_ids) {
  std::string pending;
  std::vector<char> chunk(size_t{1} << 16);
  std::vector<int32_t> ids;
  int64_t lines = 0;
  for (;;) {
    const ssize_t got = ::read(fd, chunk.data(), chunk.size());
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    pending.append(chunk.data(), static_cast<size_t>(got));
    size_t begin = 0;
    for (size_t newline; (newline = pending.find('\n', begin)) != std::string::npos; begin = newline + 1) {
      parse_ids(std::string_view(pending).substr(begin, newline - begin), ++lines, ids);
      on_ids(ids);
    }
    pending.erase(0, begin);
  }
  if (!pending.empty()) fail("spm_encode", "its output ends inside a line");
  return lines;
}

}  // namespace

void encode_lines_with_spm(const std::string& model_path, const std::function<bool(std::string&)>& next_line,
                           const std::function<void(std::vector<int32_t>&)>& on_ids) {
  SpmEncodeChild child(model_path);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> lines_sent{0};
  std::exception_ptr input_error;
  bool child_stopped_reading = false;
  // The writer feeds the child while this thread drains it: spm_encode buffers its output, so a lockstep
  // line-for-line exchange would deadlock.
  std::thread writer([&] {
    try {
      std::string line, batch;
      bool more = true;
      while (more && !stop && !child_stopped_reading) {
        more = next_line(line);
        if (more) {
          batch.append(line).push_back('\n');
          ++lines_sent;
        }
        if (!more || batch.size() >= (size_t{1} << 16)) {
          child_stopped_reading = !send_all(child.to_child(), batch);
          batch.clear();
        }
      }
    } catch (...) {
      input_error = std::current_exception();
      child.stop();  // the input is refused: no need for the rest of the output
    }
    ::shutdown(child.to_child(), SHUT_WR);
  });
  int64_t lines_received = 0;
  try {
    lines_received = read_id_lines(child.from_child(), on_ids);
  } catch (...) {
    stop = true;
    child.stop();
    writer.join();
    throw;
  }
  writer.join();
  if (input_error) std::rethrow_exception(input_error);
  const int status = child.wait();
  if (status != 0 || child_stopped_reading)
    fail("spm_encode",
         "failed (exit status " + std::to_string(status) + ") with the model " + model_path + ": " + child.messages());
  if (lines_received != lines_sent)
    fail("spm_encode", "answered " + std::to_string(lines_received) + " lines for " +
                           std::to_string(lines_sent.load()) + " with the model " + model_path);
}

// ---- C4's json lines ----

namespace {

// Lines of a gzip file (concatenated members too, as `cat *.gz` makes them) or of a plain file. zlib reads
// past a member's end into the next one, and a file without a gzip header transparently.
class JsonLinesReader {
 public:
  explicit JsonLinesReader(const std::string& path) : path_(path), chunk_(size_t{1} << 20) {
    if (!fs::is_regular_file(path)) fail(path, "no such file");
    file_.reset(::gzopen(path.c_str(), "rb"));
    if (!file_) fail(path, std::string("cannot open: ") + std::strerror(errno));
    ::gzbuffer(file_.get(), 1 << 18);
    if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0 && ::gzdirect(file_.get()))
      fail(path, "not a gzip file (its name ends in .gz)");
  }

  // The next line without its "\n"; false at the end of the file.
  bool next(std::string& line) {
    line.clear();
    for (;;) {
      const auto newline = std::find(chunk_.data() + begin_, chunk_.data() + end_, '\n');
      line.append(chunk_.data() + begin_, newline);
      begin_ = static_cast<size_t>(newline - chunk_.data());
      if (begin_ < end_) {
        ++begin_;
        ++line_number_;
        return true;
      }
      if (line.size() > kMaxLineBytes) fail(where(line_number_ + 1), "a line longer than 64 MiB");
      if (!fill()) {
        if (line.empty()) return false;
        ++line_number_;
        return true;
      }
    }
  }
  int64_t line_number() const { return line_number_; }
  std::string where(int64_t line) const { return path_ + ":" + std::to_string(line); }

 private:
  static constexpr size_t kMaxLineBytes = size_t{64} << 20;  // C4's longest document is 224,443 bytes

  bool fill() {
    const int got = ::gzread(file_.get(), chunk_.data(), static_cast<unsigned>(chunk_.size()));
    if (got < 0) {
      int code = 0;
      fail(where(line_number_ + 1), std::string("cannot decompress: ") + ::gzerror(file_.get(), &code));
    }
    int code = Z_OK;
    ::gzerror(file_.get(), &code);
    // zlib's end of input in the middle of a member: a truncated (e.g. partly downloaded) file.
    if (got == 0 && code == Z_BUF_ERROR) fail(path_, "truncated: it ends inside a gzip member");
    begin_ = 0;
    end_ = static_cast<size_t>(got);
    return got > 0;
  }

  std::string path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_{nullptr, ::gzclose};
  std::vector<char> chunk_;
  size_t begin_ = 0, end_ = 0;
  int64_t line_number_ = 0;
};

// The "text" of one json line, as the line spm_encode gets. The reference (NeMo's
// preprocess_data_for_megatron.py, no --split-sentences) encodes the whole text, newlines included, in one
// encode_as_ids call; spm_encode reads one line per document, so a newline cannot reach it. Under the nmt_nfkc
// normalizer (sentencepiece's default, the one the reference's C4 model was trained with) "\n" is a space and
// runs of spaces are one, so sending a space instead gives the same ids; `spm_encode` and libsentencepiece's
// Encode agree on that (checked for "\n", "\r\n" and "\t"). A model that keeps newlines is refused such a text.
std::string document_text(const std::string& json_line, const std::string& where, const SentencePieceModelInfo& model) {
  check_json_nesting(json_line, where);
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(json_line);
  } catch (const nlohmann::json::exception& error) {
    fail(where, "not a JSON line (" + std::string(error.what()).substr(0, 160) + ")");
  }
  if (!document.is_object()) fail(where, "not a JSON object");
  const auto text = document.find("text");
  if (text == document.end()) fail(where, "no \"text\" field");
  if (!text->is_string()) fail(where, "\"text\" is not a string");
  std::string line = text->get<std::string>();
  if (line.find('\n') == std::string::npos) return line;
  if (!model.newline_is_space())
    fail(where, "the text has a newline, which spm_encode cannot be given in one line and the model's normalizer (" +
                    model.normalizer + ") does not turn into a space");
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

Gpt3PreparedFile tokenize_json_lines(const std::string& input, const std::string& spm_model,
                                     const SentencePieceModelInfo& model, IndexedDatasetWriter& writer) {
  JsonLinesReader reader(input);
  Gpt3PreparedFile file;
  file.input = input;
  encode_lines_with_spm(
      spm_model,
      [&](std::string& line) {
        std::string json_line;
        if (!reader.next(json_line)) return false;
        line = document_text(json_line, reader.where(reader.line_number()), model);
        return true;
      },
      [&](std::vector<int32_t>& ids) {
        ++file.lines;
        // The reference's script skips a document without tokens (`if len(sentences) == 0: continue`).
        if (ids.empty()) {
          ++file.empty_documents;
          return;
        }
        writer.add_document(ids);
        ++file.documents;
        file.tokens += static_cast<int64_t>(ids.size());
      });
  return file;
}

std::string file_stem(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  for (const char* suffix : {".gz", ".jsonl", ".json"}) {
    const size_t length = std::strlen(suffix);
    if (name.size() > length && name.compare(name.size() - length, length, suffix) == 0)
      name.resize(name.size() - length);
  }
  return name;
}

}  // namespace

// The reference's preprocess.sh passes --output-prefix .../c4_en_6_c4_spm_text_document, to which NeMo's script
// appends "_text_document" (the json key and the level); the published files and run_gpt3.sh have the names
// without that repetition, which are the names written here.
std::string gpt3_output_prefix(const std::string& input_path) {
  std::string stem = file_stem(input_path);
  const std::string train = "c4-train.en_";
  if (stem.rfind(train, 0) == 0) {
    stem = "c4_en_" + stem.substr(train.size());
  } else if (stem.rfind("c4-validation", 0) == 0) {
    stem = "c4_en_validation_subset";
  }
  std::replace_if(
      stem.begin(), stem.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return stem + "_c4_spm_text_document";
}

// What the reference's preprocessing does, from its flags (scripts/preprocess.sh, preprocess_val.sh):
// - `--dataset-impl mmap`: Megatron's MMapIndexedDataset, dtype from the vocabulary size (uint16 for C4's 50,257).
// - no `--split-sentences`: the IdentitySplitter, so each document is one sequence of the whole text's ids (the
//   "_text_document" level), never split at sentences.
// - no `--append-eod`: no end-of-document token; documents lie back to back in the .bin, and GPTDataset's samples
//   run across them (run_gpt3.sh sets neither --reset-attention-mask, --reset-position-ids nor --eod-mask-loss,
//   so the EOD id is not used either). The model's own eos (id 1 in C4's model) is not appended.
// - a line whose text gives no ids (empty, or only whitespace) is skipped, not stored as an empty document.
std::vector<Gpt3PreparedFile> prepare_gpt3_dataset(const std::vector<std::string>& inputs, const std::string& spm_model,
                                                   const std::string& out_dir) {
  if (inputs.empty()) fail("prepare gpt3", "no input files");
  const SentencePieceModelInfo model = read_sentencepiece_model_info(spm_model);
  std::map<std::string, std::string> input_of_prefix;
  for (const std::string& input : inputs) {
    if (!fs::is_regular_file(input)) fail(input, "no such file");
    const auto [at, added] = input_of_prefix.emplace(gpt3_output_prefix(input), input);
    if (!added) fail(input, "would be written to the same dataset as " + at->second + " (" + at->first + ")");
  }
  fs::create_directories(out_dir);
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  std::vector<Gpt3PreparedFile> files;
  for (const std::string& input : inputs) {
    const std::string prefix = (fs::path(out_dir) / gpt3_output_prefix(input)).string();
    writers.push_back(std::make_unique<IndexedDatasetWriter>(prefix, best_token_type(model.vocab_size)));
    files.push_back(tokenize_json_lines(input, spm_model, model, *writers.back()));
    files.back().prefix = prefix;
  }
  // Every input is read and tokenized before any dataset is committed.
  for (auto& writer : writers) writer->finish();
  return files;
}

// ---- The mini corpus ----

std::vector<std::string> default_gpt3_corpus_sources() {
  const std::string testdata = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/";
  return {testdata + "pg1661.txt", testdata + "Mark.Twain-Tom.Sawyer.txt"};
}

namespace {

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

bool is_blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }
bool is_blank_line(const std::string& line) { return is_blank(line); }

// The lines of the book proper: after Gutenberg's "*** START OF" line, before its closing lines.
std::vector<std::string> book_lines(const std::string& text) {
  std::vector<std::string> lines = split_lines(starts_with(text, "\xEF\xBB\xBF") ? text.substr(3) : text);
  const auto start = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return starts_with(line, "*** START OF") || starts_with(line, "***START OF");
  });
  if (start != lines.end()) lines.erase(lines.begin(), start + 1);
  const auto end = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return starts_with(line, "End of the Project Gutenberg") || starts_with(line, "End of Project Gutenberg") ||
           starts_with(line, "*** END OF") || starts_with(line, "***END OF");
  });
  lines.erase(end, lines.end());
  return lines;
}

}  // namespace

std::string strip_gutenberg_boilerplate(const std::string& text) {
  std::vector<std::string> lines = book_lines(text);
  const auto next_text = [&](std::vector<std::string>::iterator from) {
    return std::find_if(from, lines.end(), [](const std::string& line) { return !is_blank(line); });
  };
  auto first = next_text(lines.begin());
  // The transcriber's credit ("Produced by ...") is Gutenberg's, not the book's.
  if (first != lines.end() && starts_with(*first, "Produced by"))
    first = next_text(std::find_if(first, lines.end(), is_blank_line));
  std::string book;
  for (auto line = first; line != lines.end(); ++line) book.append(*line).push_back('\n');
  return book;
}

std::vector<std::string> split_into_documents(const std::string& text, int64_t document_chars) {
  std::vector<std::string> documents;
  std::string document, paragraph;
  const auto end_paragraph = [&] {
    if (paragraph.empty()) return;
    if (!document.empty()) document.push_back('\n');
    document += paragraph;
    paragraph.clear();
    if (static_cast<int64_t>(document.size()) < document_chars) return;
    documents.push_back(document);
    document.clear();
  };
  for (const std::string& line : split_lines(text)) {
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) {
      end_paragraph();
      continue;
    }
    // Hard-wrapped lines of one paragraph are one line of text, as a web page's paragraph is in C4.
    if (!paragraph.empty()) paragraph.push_back(' ');
    paragraph.append(line, first, line.find_last_not_of(" \t") - first + 1);
  }
  end_paragraph();
  if (!document.empty()) documents.push_back(std::move(document));
  return documents;
}

namespace {

// spm_train's model prefix in the output folder, renamed to spm.model once everything else is written.
constexpr const char* kPartialModel = "spm.partial";

struct CorpusSplit {
  std::vector<std::string> train, validation;
};

CorpusSplit read_corpus(const Gpt3CorpusOptions& options, const std::vector<std::string>& sources) {
  CorpusSplit split;
  int64_t index = 0;
  const auto held_out = static_cast<int64_t>(options.seed % static_cast<uint64_t>(options.validation_every));
  for (const std::string& source : sources) {
    if (!fs::is_regular_file(source))
      fail(source, "no such file" +
                       (options.source_package.empty()
                            ? std::string()
                            : "; it is in Debian's package " + options.source_package + " (scripts/install-deps.sh)"));
    // Documents never span two books.
    for (std::string& document :
         split_into_documents(strip_gutenberg_boilerplate(read_file(source)), options.document_chars))
      (index++ % options.validation_every == held_out ? split.validation : split.train).push_back(std::move(document));
  }
  if (split.train.empty() || split.validation.empty())
    fail(sources.front(), "too little text for a training and a validation set (" + std::to_string(index) +
                              " documents of at least " + std::to_string(options.document_chars) + " characters)");
  return split;
}

// The reference's SentencePiece model was trained with (generate_spm.md in mlcommons/training's paxml utils):
// spm_train --pad_id=0 --eos_id=1 --bos_id=-1 --unk_id=2 --model_type=BPE --vocab_size=50257 --split_digits=true
// --train_extremely_large_corpus=true --max_sentence_length=10000 --byte_fallback=true --character_coverage=0.9995
// on 5,000,000 C4 examples written a line per text line. The same here, at a small vocabulary, on the training
// documents' paragraphs; one thread and a fixed seed make the model the same every time.
std::vector<std::string> spm_train_arguments(const std::string& text_path, const std::string& model_prefix,
                                             const Gpt3CorpusOptions& options) {
  return {"spm_train",
          "--input=" + text_path,
          "--model_prefix=" + model_prefix,
          "--model_type=bpe",
          "--vocab_size=" + std::to_string(options.vocab_size),
          "--pad_id=0",
          "--eos_id=1",
          "--bos_id=-1",
          "--unk_id=2",
          "--split_digits=true",
          "--byte_fallback=true",
          "--character_coverage=0.9995",
          "--max_sentence_length=10000",
          "--num_threads=1",
          "--random_seed=" + std::to_string(static_cast<uint32_t>(options.seed)),
          "--minloglevel=2"};
}

// Runs in `directory`: the model records its --input and --model_prefix as given, so relative names there
// keep the model the same wherever it is written.
void run_spm_train(const std::vector<std::string>& arguments, const std::string& directory) {
  std::vector<std::string> argument_storage = arguments;
  std::vector<char*> argv;
  for (std::string& argument : argument_storage) argv.push_back(argument.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, directory.c_str());
  pid_t child = -1;
  const int started = ::posix_spawnp(&child, "spm_train", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0)
    fail("spm_train", std::string("cannot start it (") + std::strerror(started) +
                          "); it is in Debian's package sentencepiece (scripts/install-deps.sh)");
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail(directory, "SentencePiece training failed (spm_train exited with " +
                        std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                        "; a vocabulary larger than the text allows?)");
}

// Writes <directory>/<model_name>.model and .vocab.
void train_bpe_model(const std::vector<std::string>& documents, const std::string& directory,
                     const std::string& model_name, const Gpt3CorpusOptions& options) {
  const std::string text_name = model_name + ".train.txt";
  const std::string text_path = (fs::path(directory) / text_name).string();
  {
    std::ofstream out(text_path, std::ios::binary);
    for (const std::string& document : documents) out << document << '\n';
    if (!out) fail(text_path, "cannot write the SentencePiece training text");
  }
  try {
    run_spm_train(spm_train_arguments(text_name, model_name, options), directory);
  } catch (...) {
    fs::remove(text_path);
    throw;
  }
  fs::remove(text_path);
}

struct DatasetCounts {
  int64_t documents = 0, tokens = 0;
};

DatasetCounts encode_documents(const std::vector<std::string>& documents, const std::string& model_path,
                               const SentencePieceModelInfo& model, IndexedDatasetWriter& writer) {
  DatasetCounts counts;
  size_t next = 0;
  encode_lines_with_spm(
      model_path,
      [&](std::string& line) {
        if (next == documents.size()) return false;
        line = documents[next++];
        if (model.newline_is_space()) std::replace(line.begin(), line.end(), '\n', ' ');
        return true;
      },
      [&](std::vector<int32_t>& ids) {
        if (ids.empty()) return;
        writer.add_document(ids);
        ++counts.documents;
        counts.tokens += static_cast<int64_t>(ids.size());
      });
  return counts;
}

nlohmann::json corpus_manifest(const Gpt3CorpusOptions& options, const std::vector<std::string>& sources,
                               const Gpt3CorpusSummary& summary) {
  nlohmann::json manifest;
  manifest["source_package"] = options.source_package;
  for (const std::string& source : sources)
    manifest["sources"].push_back({{"file", source}, {"bytes", fs::file_size(source)}, {"sha256", sha256_hex(source)}});
  manifest["tokenizer"] = {
      {"model", "spm.model"},
      {"vocab_size", summary.vocab_size},
      {"spm_train", spm_train_arguments(std::string(kPartialModel) + ".train.txt", kPartialModel, options)}};
  manifest["document_chars"] = options.document_chars;
  manifest["validation_every"] = options.validation_every;
  manifest["seed"] = options.seed;
  manifest["train"] = {{"prefix", fs::path(summary.train_prefix).filename().string()},
                       {"documents", summary.train_documents},
                       {"tokens", summary.train_tokens}};
  manifest["validation"] = {{"prefix", fs::path(summary.validation_prefix).filename().string()},
                            {"documents", summary.validation_documents},
                            {"tokens", summary.validation_tokens}};
  return manifest;
}

void check_corpus_options(const Gpt3CorpusOptions& options) {
  if (options.vocab_size < 300 || options.vocab_size > 65499)
    fail("vocab_size", std::to_string(options.vocab_size) + " is outside 300..65499 (byte fallback alone takes 259)");
  if (options.validation_every < 2) fail("validation_every", "must be at least 2");
  if (options.document_chars < 1) fail("document_chars", "must be at least 1");
  if (options.name.empty()) fail("name", "must not be empty");
}

}  // namespace

Gpt3CorpusSummary make_gpt3_corpus(const Gpt3CorpusOptions& options, const std::string& out_dir) {
  check_corpus_options(options);
  const std::vector<std::string> sources = options.sources.empty() ? default_gpt3_corpus_sources() : options.sources;
  const CorpusSplit split = read_corpus(options, sources);
  fs::create_directories(out_dir);
  const fs::path out(out_dir);
  const std::string partial_model = (out / kPartialModel).string();
  struct RemovePartialModel {
    std::string prefix;
    ~RemovePartialModel() {
      std::error_code ignored;
      for (const char* suffix : {".model", ".vocab"}) fs::remove(prefix + suffix, ignored);
    }
  } remove_partial_model{partial_model};
  train_bpe_model(split.train, out_dir, kPartialModel, options);
  const SentencePieceModelInfo model = read_sentencepiece_model_info(partial_model + ".model");

  Gpt3CorpusSummary summary;
  summary.vocab_size = model.vocab_size;
  summary.model_path = (out / "spm.model").string();
  summary.train_prefix = (out / (options.name + "_train_text_document")).string();
  summary.validation_prefix = (out / (options.name + "_validation_text_document")).string();
  IndexedDatasetWriter train(summary.train_prefix, best_token_type(model.vocab_size));
  IndexedDatasetWriter validation(summary.validation_prefix, best_token_type(model.vocab_size));
  const DatasetCounts train_counts = encode_documents(split.train, partial_model + ".model", model, train);
  const DatasetCounts validation_counts =
      encode_documents(split.validation, partial_model + ".model", model, validation);
  summary.train_documents = train_counts.documents;
  summary.train_tokens = train_counts.tokens;
  summary.validation_documents = validation_counts.documents;
  summary.validation_tokens = validation_counts.tokens;

  // Committed last to first in what a reader looks for: the manifest says the directory is whole.
  train.finish();
  validation.finish();
  fs::rename(partial_model + ".model", summary.model_path);
  fs::rename(partial_model + ".vocab", (out / "spm.vocab").string());
  write_file_atomically((out / "manifest.json").string(), corpus_manifest(options, sources, summary).dump(2) + "\n");
  return summary;
}

}  // namespace trainbench::data
