#pragma once
// Child processes for the tests that run the binary in the background: start one with its output in a file,
// wait for it with a limit.
#include <chrono>
#include <csignal>
#include <string>
#include <sys/types.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace trainbench::testing {

// Starts `command` under /bin/sh with its stdout and stderr in `output`; returns its pid.
inline pid_t start_in_background(const std::string& command, const std::string& output) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command + " > " + output + " 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// The exit code of `pid` (128 + the signal that ended it), or -1 after it was killed at `limit_seconds`;
// `seconds` (if given) gets how long it ran.
inline int wait_for_exit(pid_t pid, double limit_seconds, double* seconds = nullptr) {
  const auto begin = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (elapsed() > limit_seconds) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (seconds) *seconds = elapsed();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace trainbench::testing
