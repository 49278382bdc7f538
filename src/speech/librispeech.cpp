#include "speech/librispeech.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "speech/audio.h"
#include "util/confined_path.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::speech {

namespace fs = std::filesystem;

std::string normalize_transcript(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string normalized = text.substr(begin, end - begin);
  for (char& c : normalized) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return normalized;
}

namespace {

// The utterance-id -> text lines of one chapter's transcript.
std::map<std::string, std::string> read_transcript_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail(path.string(), "cannot open the transcript");
  std::map<std::string, std::string> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (normalize_transcript(line).empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0)
      fail(path.string() + ":" + std::to_string(number), "expected '<utterance-id> TEXT', got '" + line + "'");
    const std::string id = line.substr(0, space);
    if (!lines.emplace(id, normalize_transcript(line.substr(space + 1))).second)
      fail(path.string() + ":" + std::to_string(number), "a second line for utterance " + id);
  }
  return lines;
}

}  // namespace

std::vector<Utterance> read_librispeech_subset(const std::string& root, const std::string& subset) {
  const fs::path directory = fs::path(root) / subset;
  if (!fs::is_directory(directory)) fail(directory.string(), "no such LibriSpeech subset directory");
  std::vector<Utterance> utterances;
  for (const auto& speaker : fs::directory_iterator(directory)) {
    if (!speaker.is_directory()) continue;
    for (const auto& chapter : fs::directory_iterator(speaker.path())) {
      if (!chapter.is_directory()) continue;
      const std::string stem = speaker.path().filename().string() + "-" + chapter.path().filename().string();
      const fs::path transcript_path = chapter.path() / (stem + ".trans.txt");
      std::map<std::string, std::string> transcripts = read_transcript_file(transcript_path);
      for (const auto& file : fs::directory_iterator(chapter.path())) {
        if (file.path().extension() != ".flac") continue;
        const std::string id = file.path().stem().string();
        const auto line = transcripts.find(id);
        if (line == transcripts.end()) fail(transcript_path.string(), "has no line for " + file.path().string());
        Utterance utterance{id, file.path().string(), line->second, read_audio_info(file.path().string()).seconds()};
        utterances.push_back(std::move(utterance));
        transcripts.erase(line);
      }
      if (!transcripts.empty())
        fail(transcript_path.string(), "line " + transcripts.begin()->first + " has no " + transcripts.begin()->first + ".flac");
    }
  }
  if (utterances.empty()) fail(directory.string(), "holds no <speaker>/<chapter>/*.flac utterances");
  std::sort(utterances.begin(), utterances.end(), [](const Utterance& a, const Utterance& b) { return a.id < b.id; });
  return utterances;
}

std::vector<Utterance> read_librispeech_manifest(const std::string& manifest_path, const std::string& root,
                                                 bool allow_paths_outside_root) {
  std::ifstream in(manifest_path);
  if (!in) fail(manifest_path, "cannot open the manifest");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check_json_nesting(text, manifest_path);
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail(manifest_path, std::string("not valid JSON (") + error.what() + ")");
  }
  if (!manifest.is_array() || manifest.empty()) fail(manifest_path, "expected a JSON list of utterances, at least one");
  std::vector<Utterance> utterances;
  for (size_t i = 0; i < manifest.size(); ++i) {
    const nlohmann::json& entry = manifest[i];
    const std::string where = manifest_path + ": entry " + std::to_string(i);
    if (!entry.is_object() || !entry.contains("transcript") || !entry["transcript"].is_string())
      fail(where, "expected a \"transcript\" string");
    if (!entry.contains("files") || !entry["files"].is_array() || entry["files"].empty())
      fail(where, "expected a non-empty \"files\" list");
    // The converted form may list several speeds of one utterance; the reference trains on the last.
    const nlohmann::json& file = entry["files"].back();
    if (!file.contains("fname") || !file["fname"].is_string()) fail(where, "expected files[].fname");
    if (!file.contains("duration") || !file["duration"].is_number()) fail(where, "expected files[].duration");
    const double duration = file["duration"].get<double>();
    if (!(duration >= 0)) fail(where + ": files[].duration", "expected seconds >= 0, got " + json_excerpt(file["duration"]));
    const fs::path audio =
        path_inside(root, file["fname"].get<std::string>(), where + ": files[].fname", allow_paths_outside_root);
    utterances.push_back({audio.stem().string(), audio.string(), normalize_transcript(entry["transcript"].get<std::string>()),
                          duration});
  }
  return utterances;
}

std::vector<Utterance> read_librispeech(const std::string& root, const std::string& subset,
                                        bool allow_paths_outside_root) {
  const fs::path manifest = fs::path(root) / ("librispeech-" + subset + "-wav.json");
  if (fs::exists(manifest)) return read_librispeech_manifest(manifest.string(), root, allow_paths_outside_root);
  if (fs::is_directory(fs::path(root) / subset)) return read_librispeech_subset(root, subset);
  fail(root, "has neither " + manifest.filename().string() + " nor a LibriSpeech subset directory " + subset + "/");
}

std::vector<Utterance> filter_by_duration(std::vector<Utterance> utterances, double max_duration) {
  if (max_duration <= 0) return utterances;
  utterances.erase(std::remove_if(utterances.begin(), utterances.end(),
                                  [&](const Utterance& u) { return u.duration > max_duration; }),
                   utterances.end());
  return utterances;
}

}  // namespace trainbench::speech
