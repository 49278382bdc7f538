# Debian's libgtest is built with the new C++ ABI; against a LibTorch that uses the old ABI we build
# GoogleTest from the sources Debian ships in /usr/src/googletest instead.
if(TRAINBENCH_CXX11_ABI STREQUAL "0" AND EXISTS /usr/src/googletest/CMakeLists.txt)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(/usr/src/googletest ${PROJECT_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  add_library(GTest::gtest_main ALIAS gtest_main)
  add_library(GTest::gmock ALIAS gmock)
else()
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)
