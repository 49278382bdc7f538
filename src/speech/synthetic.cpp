#include "speech/synthetic.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "data/random.h"
#include "speech/audio.h"
#include "speech/librispeech.h"
#include "speech/text.h"
#include "util/error.h"

namespace trainbench::speech {

namespace fs = std::filesystem;

namespace {

constexpr int kSampleRate = 16000;
constexpr const char* kLibrivoxDir = "/usr/share/pocketsphinx/test/data/librivox";

// Upper-case words of letters and apostrophes, as LibriSpeech transcripts are written.
std::vector<std::string> transcript_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '\'') {
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

std::string run_and_read(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) fail(command, "cannot run");
  std::string output;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  if (pclose(pipe) != 0) fail(command, "failed (is the Debian package bible-kjv installed?)");
  return output;
}

// The KJV's verses as word lists (`bible` prints "Ge1:1 In the beginning God created ...").
std::vector<std::vector<std::string>> kjv_verses() {
  std::istringstream lines(run_and_read("bible -f Gen1:1-Rev22:21 2>/dev/null"));
  std::vector<std::vector<std::string>> verses;
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    std::vector<std::string> words = transcript_words(line.substr(space + 1));
    if (!words.empty()) verses.push_back(std::move(words));
  }
  if (verses.size() < 1000) fail("bible -f Gen1:1-Rev22:21", "printed too few verses");
  return verses;
}

std::vector<std::string> make_sentences(const SyntheticSpeechOptions& options, int64_t count, data::Rng& rng) {
  static const std::vector<std::string> kDigits = {"ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"};
  std::vector<std::vector<std::string>> verses;
  if (options.text == "kjv") verses = kjv_verses();
  else if (options.text != "digits") fail("dataset.text", "expected \"kjv\" or \"digits\", got \"" + options.text + "\"");
  std::vector<std::string> sentences;
  while (static_cast<int64_t>(sentences.size()) < count) {
    const auto words = static_cast<size_t>(rng.uniform_int(options.min_words, options.max_words));
    std::string sentence;
    if (verses.empty()) {
      for (size_t i = 0; i < words; ++i) sentence += (i ? " " : "") + kDigits[rng.below(kDigits.size())];
    } else {
      const std::vector<std::string>& verse = verses[rng.below(verses.size())];
      if (verse.size() < words) continue;
      const size_t start = rng.below(verse.size() - words + 1);
      for (size_t i = 0; i < words; ++i) sentence += (i ? " " : "") + verse[start + i];
    }
    sentences.push_back(sentence);
  }
  return sentences;
}

// Runs espeak-ng without a shell (the text is an argument as it is) and reads the WAV it wrote.
Audio synthesise(const std::string& voice, int rate, const std::string& text, const std::string& wav_path) {
  const std::string rate_text = std::to_string(rate);
  const pid_t child = fork();
  if (child < 0) fail("espeak-ng", "cannot start a process");
  if (child == 0) {
    execlp("espeak-ng", "espeak-ng", "-v", voice.c_str(), "-s", rate_text.c_str(), "-w", wav_path.c_str(), text.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("espeak-ng -v " + voice, "failed on '" + text + "' (is the Debian package espeak-ng installed?)");
  Audio audio = read_audio(wav_path);
  fs::remove(wav_path);
  return audio;
}

struct PlannedUtterance {
  std::string subset, text, voice;
  int speaker = 0, chapter = 0, index = 0, rate = 0;
  std::string id() const { return std::to_string(speaker) + "-" + std::to_string(chapter) + "-" + (index < 10 ? "000" : index < 100 ? "00" : index < 1000 ? "0" : "") + std::to_string(index); }
  fs::path directory(const fs::path& root) const { return root / subset / std::to_string(speaker) / std::to_string(chapter); }
};

std::vector<PlannedUtterance> plan(const SyntheticSpeechOptions& options, const std::string& subset, int64_t count,
                                   int chapter, data::Rng& rng) {
  const std::vector<std::string> sentences = make_sentences(options, count, rng);
  std::vector<PlannedUtterance> planned;
  std::map<int, int> next_index;
  for (int64_t i = 0; i < count; ++i) {
    PlannedUtterance utterance;
    utterance.subset = subset;
    utterance.text = sentences[static_cast<size_t>(i)];
    const size_t voice = static_cast<size_t>(i) % options.voices.size();
    utterance.voice = options.voices[voice];
    utterance.speaker = 100 + static_cast<int>(voice);
    utterance.chapter = chapter;
    utterance.index = next_index[utterance.speaker]++;
    utterance.rate = static_cast<int>(rng.uniform_int(options.min_rate, options.max_rate));
    planned.push_back(utterance);
  }
  return planned;
}

void write_transcripts(const fs::path& root, const std::vector<PlannedUtterance>& utterances) {
  std::map<fs::path, std::vector<const PlannedUtterance*>> chapters;
  for (const auto& u : utterances) chapters[u.directory(root)].push_back(&u);
  for (const auto& [directory, members] : chapters) {
    const fs::path path = directory / (std::to_string(members[0]->speaker) + "-" + std::to_string(members[0]->chapter) + ".trans.txt");
    std::ofstream out(path);
    for (const PlannedUtterance* u : members) out << u->id() << ' ' << u->text << '\n';
    if (!out) fail(path.string(), "cannot write the transcript");
  }
}

}  // namespace

std::string sentencepiece_model_path(const std::string& data_dir, int vocab_size) {
  return (fs::path(data_dir) / "sentencepieces" / ("librispeech" + std::to_string(vocab_size) + ".model")).string();
}

void write_librivox_subset(const std::string& out_dir, const std::string& subset) {
  const fs::path source(kLibrivoxDir);
  std::ifstream transcription(source / "transcription");
  if (!transcription) fail(source.string(), "not found (install the Debian package pocketsphinx-testdata)");
  // Lines "<s> he was not an ill disposed young man </s> (sense_and_sensibility_01_austen_64kb-0880)".
  const fs::path chapter = fs::path(out_dir) / subset / "9000" / "1";
  fs::create_directories(chapter);
  std::ofstream transcript(chapter / "9000-1.trans.txt");
  int index = 0;
  for (std::string line; std::getline(transcription, line);) {
    const size_t open = line.rfind('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string name = line.substr(open + 1, close - open - 1);
    std::string text = line.substr(0, open);
    for (const char* marker : {"<s>", "</s>"})
      for (size_t at; (at = text.find(marker)) != std::string::npos;) text.erase(at, std::string(marker).size());
    std::vector<std::string> words = transcript_words(text);
    const Audio audio = read_audio((source / (name + ".wav")).string(), kSampleRate);
    char id[32];
    std::snprintf(id, sizeof id, "9000-1-%04d", index++);
    write_flac((chapter / (std::string(id) + ".flac")).string(), audio.samples, kSampleRate);
    transcript << id;
    for (const auto& word : words) transcript << ' ' << word;
    transcript << '\n';
  }
  if (index == 0) fail((source / "transcription").string(), "holds no utterances");
}

void make_synthetic_librispeech(const std::string& out_dir, const SyntheticSpeechOptions& options) {
  if (options.voices.empty()) fail("dataset.voices", "expected at least one espeak-ng voice");
  if (options.min_words < 1 || options.max_words < options.min_words) fail("dataset.min_words", "expected 1 <= min_words <= max_words");
  data::Rng rng(data::mix_seed(options.seed, 0x5350454543ULL));
  std::vector<PlannedUtterance> utterances = plan(options, options.train_subset, options.train_utterances, 1, rng);
  const std::vector<PlannedUtterance> eval = plan(options, options.eval_subset, options.eval_utterances, 2, rng);
  utterances.insert(utterances.end(), eval.begin(), eval.end());
  const fs::path root(out_dir);
  for (const auto& u : utterances) fs::create_directories(u.directory(root));
  write_transcripts(root, utterances);

  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  const auto work = [&](int worker) {
    const std::string wav = (root / (".espeak-" + std::to_string(::getpid()) + "-" + std::to_string(worker) + ".wav")).string();
    for (size_t i; (i = next++) < utterances.size();) {
      try {
        const PlannedUtterance& u = utterances[i];
        const Audio audio = synthesise(u.voice, u.rate, u.text, wav);
        write_flac((u.directory(root) / (u.id() + ".flac")).string(), resample(audio.samples, static_cast<double>(kSampleRate) / audio.sample_rate),
                   kSampleRate);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = utterances.size();
      }
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < std::max(1, options.threads); ++w) workers.emplace_back(work, w);
  for (auto& worker : workers) worker.join();
  if (error) std::rethrow_exception(error);

  if (options.include_librivox) write_librivox_subset(out_dir, "dev-librivox");
  std::vector<std::string> transcripts;
  for (const auto& u : utterances)
    if (u.subset == options.train_subset) transcripts.push_back(normalize_transcript(u.text));
  const std::string model = sentencepiece_model_path(out_dir, options.vocab_size);
  train_sentencepiece(transcripts, options.vocab_size, model.substr(0, model.size() - std::string(".model").size()));
}

}  // namespace trainbench::speech
