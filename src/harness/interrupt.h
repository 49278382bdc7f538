#pragma once
// SIGINT/SIGTERM turn into a flag the harness polls between training steps, so an interrupted run can still
// write `run_stop` with status "aborted" and leave a complete log instead of dying mid-line.
namespace trainbench {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers
  ~InterruptGuard();  // restores the previous ones
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// The signal that asked the run to stop, or 0.
int pending_interrupt();
// For tests: behave as if `signal_number` had arrived.
void request_interrupt(int signal_number);
void clear_interrupt();

}  // namespace trainbench
