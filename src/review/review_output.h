#pragma once
// How `trainbench review` shows its verdicts: a plain-text summary for people (per system and benchmark:
// each run's verdict, minutes and convergence point, the olympic score, VALID/INVALID with reasons, and
// every finding as file:line) and the same content as JSON for tools.
#include <nlohmann/json.hpp>
#include <string>

#include "review/compliance.h"
#include "review/submission.h"

namespace trainbench::review {

std::string format_run_text(const RunReview& run);
std::string format_submission_text(const SubmissionReview& review);

nlohmann::ordered_json run_to_json(const RunReview& run);
nlohmann::ordered_json submission_to_json(const SubmissionReview& review);

// "35" for epochs, "2550016 samples" for BERT; "" when unknown.
std::string format_convergence(const RunReview& run);

// Minutes with three decimals, as results pages print them.
std::string format_minutes(double minutes);

}  // namespace trainbench::review
