#include "util/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "util/error.h"

namespace trainbench {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const auto parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) fail(parent.string(), "cannot create directory: " + ec.message());
  file_ = std::fopen(partial_path().c_str(), "w");
  if (!file_) fail(partial_path(), std::string("cannot open for writing: ") + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (file_) std::fclose(file_);  // an uncommitted file stays as .partial, as evidence
}

void AtomicFile::write(const std::string& text) {
  if (!file_) fail(path_, "write after commit");
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    fail(partial_path(), std::string("write failed: ") + std::strerror(errno));
}

void AtomicFile::commit() {
  if (!file_) return;
  const bool synced = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!synced) fail(partial_path(), std::string("cannot sync to disk: ") + std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(partial_path(), path_, ec);
  if (ec) fail(path_, "cannot move result into place: " + ec.message());
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFile file(path);
  file.write(content);
  file.commit();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace trainbench
