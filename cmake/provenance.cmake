# Records what built this binary (version, git revision, compiler, build type, LibTorch version) so every
# result log can say which code produced it.
execute_process(COMMAND git -C ${PROJECT_SOURCE_DIR} describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE TRAINBENCH_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT TRAINBENCH_GIT_REVISION)
  set(TRAINBENCH_GIT_REVISION "unknown")
endif()
set(TRAINBENCH_TORCH_VERSION "${Torch_VERSION}")
# CPU or CUDA: what this LibTorch computes on, as its CMake package declares it (Debian's build has no CUDA).
if(TORCH_CUDA_LIBRARIES)
  if(CUDAToolkit_VERSION)
    set(TRAINBENCH_TORCH_BUILD "CUDA ${CUDAToolkit_VERSION}")
  else()
    set(TRAINBENCH_TORCH_BUILD "CUDA ${CUDA_VERSION}")
  endif()
else()
  set(TRAINBENCH_TORCH_BUILD "CPU")
endif()
configure_file(${PROJECT_SOURCE_DIR}/src/util/provenance.cpp.in ${PROJECT_BINARY_DIR}/generated/provenance.cpp @ONLY)
