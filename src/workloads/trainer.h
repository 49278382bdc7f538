#pragma once
// A benchmark's model as training uses it — model, optimizer, gradient exchange, training loop and step —
// built once, by the benchmark's factory (WorkloadEntry::make_trainer), for every command that needs it: a
// run's untimed init, `bench` and `bench --memory`, `checkpoint export`, and `run --save-model`. How a model is
// built, initialized, loaded and saved is therefore written once per benchmark.
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "harness/typed_settings.h"
#include "parallel/context.h"
#include "workloads/common.h"

namespace trainbench {

namespace parallel {
class GradientSync;
}

// bench: one training step on a batch held in memory, so its time is the compute and communication alone.
struct SyntheticStep {
  std::function<void()> run;  // one whole step; it waits for the device before it returns
  std::string sample_unit;    // "img", "seq", ...
  double flops_per_sample = 0;
  std::string details;        // what the line says of the batch: "224 px", "seq 512, 76 predictions"
};

class Trainer {
 public:
  virtual ~Trainer() = default;
  // The tensors the model initialized, as the rules name them (logged as weights_initialization).
  virtual std::vector<std::string> initialized_tensors() const = 0;
  // The model as it is now, in the official implementation's format (workloads/checkpoint.h; MiniGo's .minigo).
  // A split model (model_is_split) is gathered: every rank calls it, and world rank 0 writes the file.
  virtual void save_model(const std::string& path) const = 0;
  virtual bool model_is_split() const { return false; }
  // bench: the training step on a synthetic batch of the run's per-rank (or global) batch.
  virtual SyntheticStep synthetic_step(BenchRun& run) = 0;
  // bench: the data-parallel gradient exchange whose communication the bench reports; null where there is none.
  virtual parallel::GradientSync* gradient_exchange() { return nullptr; }
  // bench: what the benchmark measures besides the training step (self-play, inference, evaluation), printed
  // before the training line; not with --memory.
  virtual void bench_before_training(BenchRun& run, std::ostream& out) {}
  // bench: the same, after the training line (loss alone, feature or data pipelines); `step_seconds` is the
  // training step's time. Not with --memory.
  virtual void bench_after_training(BenchRun& run, std::ostream& out, double step_seconds) {}
};

// What every benchmark's trainer keeps: its preset (its TrainingLoop keeps a reference to the Config), the
// preset's typed settings (harness/typed_settings.h), and the device and ranks it was built for.
template <typename Settings>
class TrainerOf : public Trainer {
 protected:
  TrainerOf(const WorkloadSettings& settings, const parallel::ParallelContext& context)
      : TrainerOf(settings, context, read_settings<Settings>(settings.config)) {}
  // With settings the benchmark has read and checked itself.
  TrainerOf(const WorkloadSettings& settings, const parallel::ParallelContext& context, Settings preset)
      : config_(settings.config), preset_(std::move(preset)), context_(context) {}

  const Config config_;
  const Settings preset_;
  const parallel::ParallelContext context_;
};

// WorkloadEntry::make_trainer for a trainer class constructed from the settings, context and purpose.
template <typename TrainerType>
std::unique_ptr<Trainer> construct_trainer(const WorkloadSettings& settings, const parallel::ParallelContext& context,
                                           TrainerPurpose purpose) {
  return std::make_unique<TrainerType>(settings, context, purpose);
}

}  // namespace trainbench
