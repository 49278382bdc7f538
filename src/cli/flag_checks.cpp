// Flag checks shared by the commands (cli/commands.h).
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "harness/cpu_contention.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::cli {

namespace {

bool parse_whole(const std::string& text, int64_t& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  value = std::strtoll(text.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

bool parse_number(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  value = std::strtod(text.c_str(), &end);
  return errno == 0 && *end == '\0' && std::isfinite(value);
}

// "0", "1", "0.5": as a user would type the bound.
std::string plain(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

CLI::Validator whole_number(int64_t minimum, int64_t maximum) {
  std::string expected = "a whole number ";
  if (maximum == INT64_MAX) expected += "of at least " + std::to_string(minimum);
  else expected += "from " + std::to_string(minimum) + " to " + std::to_string(maximum);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t value = 0;
        if (!parse_whole(text, value) || value < minimum || value > maximum) return "expected " + expected + ", got '" + text + "'";
        return "";
      },
      "", "whole number");
}

CLI::Validator number_above(double minimum) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        if (!parse_number(text, value) || !(value > minimum))
          return "expected a number above " + plain(minimum) + ", got '" + text + "'";
        return "";
      },
      "", "number");
}

CLI::Validator number_between(double above, double at_most) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        if (!parse_number(text, value) || !(value > above) || !(value <= at_most))
          return "expected a number above " + plain(above) + " and at most " + plain(at_most) + ", got '" + text + "'";
        return "";
      },
      "", "number");
}

CLI::Validator number_at_least(double minimum) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        if (!parse_number(text, value) || value < minimum)
          return "expected a number of at least " + plain(minimum) + ", got '" + text + "'";
        return "";
      },
      "", "number");
}

void require_utf8(const std::string& flag, const std::string& value) {
  try {
    (void)nlohmann::json(value).dump();
  } catch (const nlohmann::json::type_error&) {
    fail(flag, "not valid UTF-8 text (it is written into the JSON log)");
  }
}

CLI::Validator thread_count() {
  const int cpus = usable_cpu_count();
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t value = 0;
        if (!parse_whole(text, value) || value < 1) return "expected a whole number of at least 1, got '" + text + "'";
        if (value > cpus)
          return "at most " + std::to_string(cpus) + " on this machine (the CPUs this process may run on), got " + text;
        return "";
      },
      "", "threads");
}

namespace {

CLI::Validator output_path(bool folder, const std::string& wanted) {
  return CLI::Validator(
      [=](std::string& path) -> std::string {
        const std::string found = blocking_output(path, folder);
        return found.empty() ? "" : path + " is " + found + "; " + wanted;
      },
      folder ? "DIR" : "FILE", folder ? "output folder" : "output file");
}

}  // namespace

CLI::Validator output_file() { return output_path(false, "give the path of a file to write"); }
CLI::Validator output_folder() { return output_path(true, "give a folder to write into"); }

}  // namespace trainbench::cli
