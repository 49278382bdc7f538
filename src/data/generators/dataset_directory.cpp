#include "data/generators/dataset_directory.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "util/error.h"

namespace trainbench::data {

namespace fs = std::filesystem;

fs::path write_new_dataset_directory(const std::string& out_dir, const std::function<void(const fs::path&)>& generate) {
  fs::path out = fs::path(out_dir).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "data/" -> "data"
  if (out.empty()) fail("out_dir", "expected a directory path, got '" + out_dir + "'");
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    fail(out.string(), "already exists; the generator only writes a new directory (remove it or pick another)");

  const fs::path staging = out.string() + ".partial";
  fs::remove_all(staging, ec);  // left over from an interrupted run
  try {
    generate(staging);
    fs::remove(out, ec);  // the empty directory, if any
    fs::rename(staging, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, ec);
    fail(e.path1().string(), std::string("cannot write the dataset: ") + e.code().message());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  return out;
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!file) fail(path.string(), std::string("cannot open for writing: ") + std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), file.get()) != bytes.size())
    fail(path.string(), std::string("write failed: ") + std::strerror(errno));
  if (std::fclose(file.release()) != 0) fail(path.string(), std::string("write failed: ") + std::strerror(errno));
}

}  // namespace trainbench::data
