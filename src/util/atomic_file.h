#pragma once
// Files that are either complete or absent. A file grows as `<path>.partial`, flushed line by line so a crash
// leaves evidence, and only becomes `<path>` when commit() renames it (rename is atomic on POSIX).
//
// Two modes. Replace (reports, markers): commit() atomically replaces an existing `<path>`. Keep (result
// logs, which must never be lost or crossed): the `.partial` is created exclusively, so two writers can never
// share it, and commit() never replaces a file that is already there (renameat2's RENAME_NOREPLACE, or
// link() where the file system lacks it).
#include <cstdio>
#include <memory>
#include <string>

namespace trainbench {

class AtomicFile {
 public:
  enum class Existing { kReplace, kKeep };

  // Opens `<path>.partial`. With kKeep it fails (Error naming the path) when `<path>` or its partial exists.
  explicit AtomicFile(std::string path, Existing existing = Existing::kReplace);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Reserves the first `<dir>/<prefix>N<suffix>` (N = 0, 1, ...) for which neither the file nor its partial
  // exists, by creating the partial exclusively: any number of processes reserving in one directory at once
  // each get their own N. Creates `dir` as needed.
  static std::unique_ptr<AtomicFile> reserve_numbered(const std::string& dir, const std::string& prefix,
                                                      const std::string& suffix);

  // Appends text and flushes it to the kernel, so a killed process still leaves every written line.
  void write(const std::string& text);
  // fsyncs the partial file and moves it to its final path (without replacing one, in kKeep mode).
  void commit();

  const std::string& path() const { return path_; }
  std::string partial_path() const { return path_ + ".partial"; }

 private:
  struct Exclusive {};
  // kKeep without throwing when the name is taken: file_ stays null.
  AtomicFile(std::string path, Exclusive);
  std::string path_;
  Existing existing_;
  std::FILE* file_ = nullptr;
};

// Writes a whole file through AtomicFile, creating parent directories as needed.
void write_file_atomically(const std::string& path, const std::string& content);

// Reads a whole file; throws Error naming the path when it cannot.
std::string read_file(const std::string& path);

}  // namespace trainbench
