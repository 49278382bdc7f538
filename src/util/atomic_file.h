#pragma once
// Files that are either complete or absent. A file grows as `<path>.partial` (partial_path_for), flushed line
// by line, and only becomes `<path>` when commit() renames it (rename is atomic on POSIX).
//
// Two modes. Replace (exports, reports, markers): commit() atomically replaces an existing regular `<path>`; a
// directory, device, FIFO or socket there is refused before anything is written, and a file that is not
// committed (an error, an exception) is removed. Keep (result logs, which must never be lost or crossed): the
// `.partial` is created exclusively, so two writers can never share it, commit() never replaces a file that is
// already there (renameat2's RENAME_NOREPLACE, or link() where the file system lacks it), and an uncommitted
// partial stays as evidence of the run that wrote it.
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
  std::string partial_path() const { return partial_path_for(path_); }
  // `<path>.partial`; for a name too long to take the suffix (a legal 250-byte name), the name cut short with a
  // hash of the whole name in its place, so the partial is still one name per path.
  static std::string partial_path_for(const std::string& path);

 private:
  struct Exclusive {};
  // kKeep without throwing when the name is taken: file_ stays null.
  AtomicFile(std::string path, Exclusive);
  std::string path_;
  Existing existing_;
  std::FILE* file_ = nullptr;
};

// What is at `path` that an output may not replace ("a directory", "a device", "a FIFO", "a socket"); "" when
// nothing is there, a regular file, or, for a `folder`, a directory.
std::string blocking_output(const std::string& path, bool folder = false);

// Writes a whole file through AtomicFile, creating parent directories as needed.
void write_file_atomically(const std::string& path, const std::string& content);

// Reads a whole file; throws Error naming the path when it cannot.
std::string read_file(const std::string& path);

}  // namespace trainbench
