// libFuzzer target: RNN-T's input files. The first byte chooses which one the rest is: 0 the reference's
// manifest (librispeech-<subset>-wav.json), 1 a chapter's transcript (<speaker>-<chapter>.trans.txt, read with
// the chapter's one FLAC), 2 an audio file (libsndfile reads FLAC, WAV and more by their headers). Every outcome
// must be utterances or audio, or an Error naming the file; never a crash, a hang or an out-of-bounds read.
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "fuzz_entry.h"
#include "speech/audio.h"
#include "speech/librispeech.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using namespace trainbench::speech;

// A one-second 16 kHz FLAC, written once: the utterance the fuzzed transcript describes.
void write_chapter_audio(const fs::path& chapter) {
  static const std::vector<float> tone = [] {
    std::vector<float> samples(16000);
    for (size_t i = 0; i < samples.size(); ++i) samples[i] = 0.1f * std::sin(0.05f * static_cast<float>(i));
    return samples;
  }();
  if (!fs::exists(chapter / "19-198-0000.flac")) write_flac((chapter / "19-198-0000.flac").string(), tone, 16000);
}

void expect_named(const trainbench::Error& error, const std::string& path) {
  if (std::string(error.what()).find(path) == std::string::npos) std::abort();  // every error names the file
}

}  // namespace

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const fs::path root = trainbench::fuzz::scratch_dir();
  switch (data[0] % 3) {
    case 0: {
      const std::string path = trainbench::fuzz::write_scratch_file("librispeech-x-wav.json", data + 1, size - 1);
      try {
        for (const Utterance& utterance : read_librispeech_manifest(path, root.string()))
          if (!(utterance.duration >= 0) || utterance.audio_path.rfind(root.string(), 0) != 0) std::abort();
      } catch (const trainbench::Error& error) {
        expect_named(error, path);
      }
      break;
    }
    case 1: {
      const fs::path chapter = root / "subset" / "19" / "198";
      fs::create_directories(chapter);
      write_chapter_audio(chapter);
      const std::string path = (chapter / "19-198.trans.txt").string();
      trainbench::fuzz::write_scratch_file("subset/19/198/19-198.trans.txt", data + 1, size - 1);
      try {
        const std::vector<Utterance> utterances = read_librispeech_subset(root.string(), "subset");
        if (utterances.size() != 1) std::abort();
      } catch (const trainbench::Error& error) {
        expect_named(error, "19-198");
      }
      break;
    }
    default: {
      const std::string path = trainbench::fuzz::write_scratch_file("audio.flac", data + 1, size - 1);
      try {
        const AudioInfo info = read_audio_info(path);
        if (info.seconds() < 60) (void)read_audio(path, 16000);  // long files are only measured
      } catch (const trainbench::Error& error) {
        expect_named(error, path);
      }
    }
  }
  return 0;
}
