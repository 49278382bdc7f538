#pragma once
// File digests through OpenSSL's EVP interface (Debian's libssl-dev), for checks against the digests the
// references publish (U-Net3D's checksum.json) and for logging which file a run used (RNN-T's tokenizer).
#include <string>

namespace trainbench {

// The md5 of the file's bytes as 32 lowercase hex digits, as Python's hashlib.md5(data).hexdigest(); an Error
// naming `path` when it cannot be read.
std::string md5_hex(const std::string& path);

}  // namespace trainbench
