#pragma once
// What built this binary; filled in at configure time (cmake/provenance.cmake).
namespace trainbench::provenance {

extern const char* const kVersion;
extern const char* const kGitRevision;
extern const char* const kCompiler;
extern const char* const kBuildType;
extern const char* const kTorchVersion;
extern const char* const kTorchBuild;  // "CPU" or "CUDA 13.0"

}  // namespace trainbench::provenance
