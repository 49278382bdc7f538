#pragma once
// File digests through OpenSSL's EVP interface (Debian's libssl-dev), for checks against the digests the
// references publish (U-Net3D's checksum.json) and for logging which file a run used (RNN-T's tokenizer).
#include <string>

namespace trainbench {

// The md5 of the file's bytes as 32 lowercase hex digits, as Python's hashlib.md5(data).hexdigest(); an Error
// naming `path` when it cannot be read.
std::string md5_hex(const std::string& path);

// The SHA-256 of the file's bytes as 64 lowercase hex digits (hashlib.sha256), for recording which source file a
// generated dataset came from (GPT-3's mini corpus).
std::string sha256_hex(const std::string& path);

}  // namespace trainbench
