# Records what built this binary (version, git revision, compiler, build type, LibTorch version) so every
# result log can say which code produced it.
execute_process(COMMAND git -C ${PROJECT_SOURCE_DIR} describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE TRAINBENCH_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT TRAINBENCH_GIT_REVISION)
  set(TRAINBENCH_GIT_REVISION "unknown")
endif()
set(TRAINBENCH_TORCH_VERSION "${Torch_VERSION}")
configure_file(${PROJECT_SOURCE_DIR}/src/util/provenance.cpp.in ${PROJECT_BINARY_DIR}/generated/provenance.cpp @ONLY)
