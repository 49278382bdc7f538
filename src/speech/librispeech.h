#pragma once
// The LibriSpeech corpus in its two on-disk forms:
//   - the distributed layout, <root>/<subset>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac with one
//     <speaker>-<chapter>.trans.txt per chapter (lines "<utterance-id> UPPER CASE TEXT");
//   - the MLPerf reference's converted form (utils/convert_librispeech.py): <root>/librispeech-<subset>-wav.json,
//     a list of {"transcript", "files": [{"fname", "duration", ...}], "original_duration", ...} whose fnames
//     are relative to <root>.
// Transcripts are lower-cased and stripped as the reference's preprocessing does.
#include <string>
#include <vector>

namespace trainbench::speech {

struct Utterance {
  std::string id;          // "1272-128104-0000" (the file name's stem in the manifest form)
  std::string audio_path;  // absolute or relative to the working directory
  std::string transcript;  // lower case
  double duration = 0;     // seconds
};

// "AND THE  EARTH\n" -> "and the  earth": lower case, surrounding whitespace stripped.
std::string normalize_transcript(const std::string& text);

// One subset of the distributed layout; every .flac needs its transcript line and every transcript line its
// .flac (an Error names the file or the line otherwise). Durations come from the FLAC headers. Ordered by id.
std::vector<Utterance> read_librispeech_subset(const std::string& root, const std::string& subset);

// One manifest of the converted form. An Error names the file when it lists no utterance, and the file and
// entry on a missing field, a negative duration, or an fname that is absolute or leads out of `root` unless
// `allow_paths_outside_root` (no preset setting asks for that yet).
std::vector<Utterance> read_librispeech_manifest(const std::string& manifest_path, const std::string& root,
                                                 bool allow_paths_outside_root = false);

// <root>/librispeech-<subset>-wav.json when it exists, else the distributed layout <root>/<subset>; an
// Error names both when neither exists.
std::vector<Utterance> read_librispeech(const std::string& root, const std::string& subset,
                                        bool allow_paths_outside_root = false);

// The reference's duration filter: keeps utterances no longer than max_duration seconds (<= 0: keep all).
std::vector<Utterance> filter_by_duration(std::vector<Utterance> utterances, double max_duration);

}  // namespace trainbench::speech
