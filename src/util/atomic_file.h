#pragma once
// Files that are either complete or absent. A result log grows as `<path>.partial`, flushed line by line so
// a crash leaves evidence, and only becomes `<path>` when commit() renames it (rename is atomic on POSIX).
#include <cstdio>
#include <string>

namespace trainbench {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends text and flushes it to the kernel, so a killed process still leaves every written line.
  void write(const std::string& text);
  // fsyncs the partial file and renames it to its final path.
  void commit();

  const std::string& path() const { return path_; }
  std::string partial_path() const { return path_ + ".partial"; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Writes a whole file through AtomicFile, creating parent directories as needed.
void write_file_atomically(const std::string& path, const std::string& content);

// Reads a whole file; throws Error naming the path when it cannot.
std::string read_file(const std::string& path);

}  // namespace trainbench
