#pragma once
// GPT-3's text pipeline, torch-free: the reference's C4 preprocessing (`data prepare gpt3`) and the mini corpus
// (`data make gpt3`), both written as Megatron's memory-mapped indexed datasets (data/megatron_indexed.h).
//
// Tokenizing runs Debian's `spm_encode` (package sentencepiece) as a child process and streams documents through
// it, one a line: libsentencepiece carries its own protobuf, which breaks LibTorch in one process
// (speech/text.h). The SentencePiece model file itself is read here only for its vocabulary size and normalizer.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trainbench::data {

// What this pipeline needs of a SentencePiece model (ModelProto, read without libsentencepiece).
struct SentencePieceModelInfo {
  int64_t vocab_size = 0;  // pieces, as sentencepiece's get_piece_size() counts them
  std::string normalizer;  // NormalizerSpec.name, e.g. "nmt_nfkc"
  // nmt_nfkc and nmt_nfkc_cf map "\n" (and "\t", "\r") to a space; identity and nfkc keep it.
  bool newline_is_space() const;
};

// An Error names the file when it is missing or not a SentencePiece model.
SentencePieceModelInfo read_sentencepiece_model_info(const std::string& model_path);

// Streams lines through `spm_encode --model MODEL --output_format id`. `next_line` runs on a writer thread: it
// fills one line (without "\n") and returns false after the last; `on_ids` gets each line's ids, in order, on
// the calling thread. An exception from either callback ends the child and is rethrown here; an Error names
// spm_encode when it fails or answers with another number of lines.
void encode_lines_with_spm(const std::string& model_path, const std::function<bool(std::string&)>& next_line,
                           const std::function<void(std::vector<int32_t>&)>& on_ids);

// ---- The reference's preprocessing of C4 ----

// The output prefix (without directory) run_gpt3.sh reads for a C4 input: "c4-train.en_6.json.gz" ->
// "c4_en_6_c4_spm_text_document", "c4-validation_24567exp.json" -> "c4_en_validation_subset_c4_spm_text_document";
// any other name -> its stem (".gz", ".json" and ".jsonl" dropped, other than letters and digits as "_") +
// "_c4_spm_text_document".
std::string gpt3_output_prefix(const std::string& input_path);

struct Gpt3PreparedFile {
  std::string input;
  std::string prefix;  // out_dir/<gpt3_output_prefix(input)>; .bin and .idx beside it
  int64_t lines = 0;
  int64_t documents = 0;        // lines that gave at least one token
  int64_t empty_documents = 0;  // lines that gave none: skipped, as the reference's script skips them
  int64_t tokens = 0;
};

// Tokenizes C4 json-lines files (gzip, concatenated gzip members as `cat *.gz` makes them, or plain) with the
// SentencePiece model into one indexed dataset per input, as NeMo's preprocess_data_for_megatron.py does with
// the reference's flags. Bad input (a missing or non-gzip file, a line that is not a JSON object with a string
// "text") is refused with an Error naming the file and line; the outputs are committed only after every input
// succeeded, so a failure leaves none of them.
std::vector<Gpt3PreparedFile> prepare_gpt3_dataset(const std::vector<std::string>& inputs, const std::string& spm_model,
                                                   const std::string& out_dir);

// ---- The mini corpus ----

// Debian's golang-github-pierrec-lz4-dev ships two Project Gutenberg books as compression test data: The
// Adventures of Sherlock Holmes (pg1661.txt, with Gutenberg's header, footer and licence) and The Adventures of
// Tom Sawyer (already without them). Both are public domain in the USA.
constexpr const char* kGpt3CorpusPackage = "golang-github-pierrec-lz4-dev";
std::vector<std::string> default_gpt3_corpus_sources();

struct Gpt3CorpusOptions {
  std::vector<std::string> sources;                 // plain-text books; empty: default_gpt3_corpus_sources()
  std::string source_package = kGpt3CorpusPackage;  // recorded in the manifest
  std::string name = "gutenberg_en";                // datasets: <name>_{train,validation}_text_document
  int64_t vocab_size = 4096;
  int64_t document_chars = 1500;  // paragraphs are grouped into documents of at least this many characters
  int64_t validation_every = 10;  // one document in each run of this many is held out for validation
  uint64_t seed = 1234;           // which one of each run, and spm_train's random seed
};

struct Gpt3CorpusSummary {
  std::string model_path;  // out_dir/spm.model
  std::string train_prefix, validation_prefix;
  int64_t vocab_size = 0;
  int64_t train_documents = 0, train_tokens = 0;
  int64_t validation_documents = 0, validation_tokens = 0;
};

// Plain text of a Project Gutenberg book: a byte-order mark, CRLF line ends and everything up to the "*** START
// OF" line and from the "End of the Project Gutenberg" (or "*** END OF") line on removed, and a leading
// "Produced by" credit paragraph.
std::string strip_gutenberg_boilerplate(const std::string& text);

// Paragraphs (blank-line separated, hard line breaks joined with spaces) grouped in order into documents of at
// least `document_chars` characters, paragraphs separated by "\n" as in C4's texts.
std::vector<std::string> split_into_documents(const std::string& text, int64_t document_chars);

// Reads the books, splits them into documents, holds out every validation_every-th document, trains a BPE
// SentencePiece model with spm_train on the training documents alone (the reference's generate_spm.md settings
// at a small vocabulary) and writes out_dir/spm.model, the two indexed datasets and out_dir/manifest.json.
// Deterministic for the options (the same bytes wherever out_dir is). A failure commits none of the files; each is
// committed on its own at the end, manifest.json last, so a caller that needs the folder whole (with the mini
// checkpoint beside them) runs this inside write_new_dataset_directory.
Gpt3CorpusSummary make_gpt3_corpus(const Gpt3CorpusOptions& options, const std::string& out_dir);

}  // namespace trainbench::data
