// coco-eval: pycocotools-compatible COCO detection metrics from a ground truth and a results file. Thin: it parses
// the flags, calls src/coco and prints; bad input throws trainbench::Error (exit code 2).
#include <future>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "harness/cpu_contention.h"
#include "coco/annotations.h"
#include "coco/evaluator.h"
#include "coco/results.h"

namespace trainbench::cli {

namespace {

struct CocoEvalFlags {
  std::string ground_truth;
  std::string results;
  std::string type = "bbox";
  bool json = false;
  unsigned threads = 0;
};

}  // namespace

void add_coco_commands(CLI::App& app, CommandContext&) {
  auto flags = std::make_shared<CocoEvalFlags>();
  CLI::App* command = app.add_subcommand(
      "coco-eval",
      "COCO bbox or segm metrics of a results file, equal to pycocotools 2.0's COCOeval (prints its 12 summary lines)");
  command->add_option("--gt", flags->ground_truth, "COCO instances JSON (ground truth)")
      ->required()
      ->check(CLI::ExistingFile);
  command
      ->add_option("--dt", flags->results,
                   "Results JSON: a list of {image_id, category_id, score, bbox | segmentation (RLE)} or of rows "
                   "[image_id, x, y, w, h, score, category_id]")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--type", flags->type, "bbox or segm")
      ->check(CLI::IsMember({"bbox", "segm"}))
      ->capture_default_str();
  command->add_flag("--json", flags->json, "Print the 12 numbers as JSON, with names and full precision");
  command->add_option("--threads", flags->threads, "Threads (0: every core); results do not depend on it")
      ->capture_default_str()->check(whole_number(0, usable_cpu_count()));
  command->callback([flags] {
    const coco::IouType type = coco::parse_iou_type(flags->type);
    // The two files are read at the same time; a bad ground truth is still reported before bad results.
    auto results = std::async(std::launch::async, coco::load_results, flags->results);
    const coco::Evaluator evaluator(coco::load_ground_truth(flags->ground_truth), type, flags->ground_truth);
    const coco::Evaluation evaluation = evaluator.evaluate(results.get(), flags->results, flags->threads);
    if (flags->json)
      std::cout << coco::summary_json(evaluation.stats, type).dump(2) << "\n";
    else
      std::cout << coco::format_summary(evaluation.stats);
  });
}

}  // namespace trainbench::cli
