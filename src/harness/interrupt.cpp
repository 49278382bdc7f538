#include "harness/interrupt.h"

#include <atomic>
#include <csignal>

namespace trainbench {

namespace {

std::atomic<int> interrupt_signal{0};
struct sigaction previous_int, previous_term;

extern "C" void on_interrupt(int signal_number) { interrupt_signal.store(signal_number); }

}  // namespace

InterruptGuard::InterruptGuard() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
}

int pending_interrupt() { return interrupt_signal.load(); }
void request_interrupt(int signal_number) { interrupt_signal.store(signal_number); }
void clear_interrupt() { interrupt_signal.store(0); }

}  // namespace trainbench
