#include "util/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

namespace trainbench {

namespace {

void create_parent_directories(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) fail(parent.string(), "cannot create directory: " + ec.message());
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace

std::string blocking_output(const std::string& path, bool folder) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return "";
  if (folder ? S_ISDIR(status.st_mode) : S_ISREG(status.st_mode)) return "";
  if (S_ISDIR(status.st_mode)) return "a directory";
  if (S_ISREG(status.st_mode)) return "a file";
  if (S_ISCHR(status.st_mode) || S_ISBLK(status.st_mode)) return "a device";
  if (S_ISFIFO(status.st_mode)) return "a FIFO";
  return S_ISSOCK(status.st_mode) ? "a socket" : "not a regular file";
}

namespace {

// A replace-mode output must land on a regular file or on nothing: rename() over a device as root turns it into a
// file, and over a directory it fails after the whole output was written.
void require_regular_or_absent(const std::string& path) {
  const std::string found = blocking_output(path);
  if (!found.empty()) fail(path, "is " + found + "; give the path of a file to write (nothing was written)");
}

// Creates `partial` exclusively; null when the name is taken (by it or by the committed `path`).
std::FILE* create_exclusively(const std::string& path, const std::string& partial) {
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return nullptr;
    fail(partial, std::string("cannot create: ") + std::strerror(errno));
  }
  // A writer may have committed `path` between our look and our create; its partial is gone then, so
  // ours succeeded, and the committed file is what tells us the number is taken.
  if (exists(path)) {
    ::close(fd);
    ::unlink(partial.c_str());
    return nullptr;
  }
  return ::fdopen(fd, "w");
}

// rename() without replacing an existing `to`: renameat2(RENAME_NOREPLACE), or link + unlink where the file
// system does not offer it (both fail with EEXIST when `to` exists).
int rename_without_replacing(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  if (::link(from.c_str(), to.c_str()) != 0) return -1;
  ::unlink(from.c_str());
  return 0;
}

}  // namespace

AtomicFile::AtomicFile(std::string path, Existing existing) : path_(std::move(path)), existing_(existing) {
  create_parent_directories(path_);
  if (existing_ == Existing::kKeep) {
    file_ = create_exclusively(path_, partial_path());
    if (!file_) fail(path_, "already exists (or is being written by another run, as " + partial_path() + "); not replacing it");
  } else {
    require_regular_or_absent(path_);
    file_ = std::fopen(partial_path().c_str(), "we");
  }
  if (!file_) fail(partial_path(), std::string("cannot open for writing: ") + std::strerror(errno));
}

AtomicFile::AtomicFile(std::string path, Exclusive) : path_(std::move(path)), existing_(Existing::kKeep) {
  file_ = create_exclusively(path_, partial_path());
}

std::unique_ptr<AtomicFile> AtomicFile::reserve_numbered(const std::string& dir, const std::string& prefix,
                                                         const std::string& suffix) {
  const std::string stem = (std::filesystem::path(dir) / prefix).string();
  create_parent_directories(stem);
  for (long index = 0;; ++index) {
    const std::string path = stem + std::to_string(index) + suffix;
    if (exists(path)) continue;
    std::unique_ptr<AtomicFile> file(new AtomicFile(path, Exclusive{}));
    if (file->file_) return file;
  }
}

std::string AtomicFile::partial_path_for(const std::string& path) {
  constexpr size_t kNameMax = 255, kSuffix = sizeof(".partial") - 1, kHashDigits = 16;
  const std::filesystem::path target(path);
  const std::string name = target.filename().string();
  if (name.size() + kSuffix <= kNameMax) return path + ".partial";
  uint64_t hash = 1469598103934665603ull;  // FNV-1a of the whole name
  for (const unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  char digits[kHashDigits + 1];
  std::snprintf(digits, sizeof digits, "%016llx", static_cast<unsigned long long>(hash));
  const std::string shortened = name.substr(0, kNameMax - kSuffix - kHashDigits - 1) + "~" + digits + ".partial";
  return (target.parent_path() / shortened).string();
}

AtomicFile::~AtomicFile() {
  if (!file_) return;
  std::fclose(file_);
  // A result log's partial stays as evidence of the run; any other uncommitted output is removed.
  if (existing_ == Existing::kReplace) ::unlink(partial_path().c_str());
}

void AtomicFile::write(const std::string& text) {
  if (!file_) fail(path_, "write after commit");
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    fail(partial_path(), std::string("write failed: ") + std::strerror(errno));
}

void AtomicFile::commit() {
  if (!file_) return;
  const bool synced = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
  const int sync_errno = errno;
  std::fclose(file_);
  file_ = nullptr;
  if (!synced) {
    if (existing_ == Existing::kReplace) ::unlink(partial_path().c_str());
    fail(partial_path(), std::string("cannot sync to disk: ") + std::strerror(sync_errno));
  }
  if (existing_ == Existing::kKeep) {
    if (rename_without_replacing(partial_path(), path_) != 0)
      fail(path_, std::string("cannot move ") + partial_path() + " into place: " + std::strerror(errno) +
                      " (the finished file stays at " + partial_path() + ")");
    return;
  }
  std::error_code ec;
  std::filesystem::rename(partial_path(), path_, ec);
  if (ec) {
    ::unlink(partial_path().c_str());
    fail(path_, "cannot move result into place: " + ec.message());
  }
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
