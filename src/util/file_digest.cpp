#include "util/file_digest.h"

#include <fstream>
#include <memory>
#include <vector>

#include <openssl/evp.h>

#include "util/error.h"

namespace trainbench {

namespace {

std::string digest_hex(const std::string& path, const EVP_MD* algorithm, const char* name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), algorithm, nullptr) != 1)
    fail(path, std::string("OpenSSL has no ") + name);
  std::vector<char> buffer(size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) fail(path, "read error");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  static const char* const kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace

std::string md5_hex(const std::string& path) { return digest_hex(path, EVP_md5(), "MD5"); }

std::string sha256_hex(const std::string& path) { return digest_hex(path, EVP_sha256(), "SHA-256"); }

}  // namespace trainbench
