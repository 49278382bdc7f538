#pragma once
// `trainbench data make rnnt`: a small LibriSpeech-layout corpus.
//   <out>/<train_subset>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac + .trans.txt, and the same for
//   <eval_subset>: speech synthesised with espeak-ng (Debian) from real text, every voice a speaker, a speaking
//   rate drawn per utterance, resampled to 16 kHz and written as 16-bit FLAC;
//   <out>/dev-librivox/: the real LibriVox recordings pocketsphinx-testdata ships (Sense and Sensibility, the
//   audiobook source LibriSpeech is cut from), re-encoded to FLAC: a smoke test, not a target;
//   <out>/sentencepieces/librispeech<vocab>.model: the tokenizer trained on the training transcripts.
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::speech {

struct SyntheticSpeechOptions {
  // Where sentences come from: "kjv" (verse fragments from the King James Bible via bible-kjv's `bible`) or
  // "digits" (spoken digit strings: a closed vocabulary small models learn in seconds).
  std::string text = "kjv";
  int min_words = 3, max_words = 8;
  int64_t train_utterances = 400, eval_utterances = 100;
  std::string train_subset = "train-synth", eval_subset = "dev-synth";
  std::vector<std::string> voices = {"en-us", "en-gb", "en-gb-scotland", "en-029"};
  int min_rate = 140, max_rate = 180;  // espeak-ng words per minute
  int vocab_size = 128;                // sentencepiece pieces, <unk> included
  bool include_librivox = true;
  uint64_t seed = 1;
  int threads = 2;  // concurrent espeak-ng processes
};

// The sentencepiece model's path under a dataset directory, as the reference names it.
std::string sentencepiece_model_path(const std::string& data_dir, int vocab_size);

void make_synthetic_librispeech(const std::string& out_dir, const SyntheticSpeechOptions& options);

// Writes the real pocketsphinx-testdata LibriVox utterances as LibriSpeech subset `subset` of `out_dir`; an
// Error names the missing directory (and the Debian package) when they are not installed.
void write_librivox_subset(const std::string& out_dir, const std::string& subset);

}  // namespace trainbench::speech
