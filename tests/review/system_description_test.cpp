#include "review/system_description.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace trainbench::review {
namespace {

using nlohmann::json;
using testing::dump;
using testing::find_finding;

const SystemDescriptionRules& rules() { return testing::ruleset_1_1().system_description; }

TEST(SystemDescription, TheRulesetListsThe33Fields) { EXPECT_EQ(rules().fields.size(), 33u); }

TEST(SystemDescription, NvidiaDescriptionsPass) {
  if (!testing::nvidia_fixture_present()) GTEST_SKIP();
  json description;
  const auto findings =
      check_system_description_file(testing::nvidia_path("systems/dgxa100_ngc21.09_mxnet.json"), rules(), &description);
  EXPECT_TRUE(findings.empty()) << dump(findings);
  EXPECT_EQ(accelerator_count(description), 8);
  EXPECT_EQ(hardware_label(description), "8x NVIDIA A100-SXM4-80GB (400W)");
}

json complete_description() {
  json description = json::object();
  for (const auto& field : rules().fields) description[field] = "";
  description["number_of_nodes"] = "2";
  description["accelerators_per_node"] = "4";
  description["accelerator_model_name"] = "Example GPU";
  return description;
}

// The v1.1 system_desc_checker checks that the 33 fields are present and nothing else: only a missing
// field is an error; odd values are warnings.
TEST(SystemDescription, ReportsMissingFieldsAsErrorsAndOddValuesAsWarnings) {
  json description = complete_description();
  EXPECT_TRUE(check_system_description(description, "s.json", rules()).empty());
  EXPECT_EQ(hardware_label(description), "8x Example GPU");

  description.erase("cooling");
  description["framework"] = 3;
  description["other_software_stack"] = json::array({json{{"cuda", "12"}}});  // any value is fine here
  description["accelerators_per_node"] = "eight";
  description["favourite_colour"] = "blue";
  const auto findings = check_system_description(description, "s.json", rules());
  EXPECT_NE(find_finding(findings, Severity::kError, "missing required field 'cooling'"), nullptr) << dump(findings);
  EXPECT_NE(find_finding(findings, Severity::kWarning, "field 'framework' is 3, not text"), nullptr) << dump(findings);
  EXPECT_NE(
      find_finding(findings, Severity::kWarning, "field 'accelerators_per_node' is \"eight\", not a whole number"),
      nullptr)
      << dump(findings);
  EXPECT_NE(find_finding(findings, Severity::kWarning, "field 'favourite_colour' is not one of the required fields"),
            nullptr);
  EXPECT_EQ(find_finding(findings, Severity::kWarning, "other_software_stack"), nullptr) << dump(findings);
  EXPECT_EQ(count_findings(findings, Severity::kError), 1) << dump(findings);

  EXPECT_FALSE(check_system_description(json::array(), "s.json", rules()).empty());
}

// From 4.0.0 a status, when present, must be an availability the round lists: 4.0.0 also takes one whose lower
// case is listed ("Onprem"), 4.1.0 on only the four exact values.
TEST(SystemDescription, FromFourPointZeroTheStatusIsOneOfTheListedAvailabilities) {
  const auto status_errors = [](const std::string& version, const json& status) {
    json description = complete_description();
    description["status"] = status;
    const auto findings = check_system_description(description, "s.json", load_ruleset(version).system_description);
    return count_findings(findings, Severity::kError);
  };
  EXPECT_EQ(status_errors("3.1.0", "anything"), 0);
  EXPECT_EQ(status_errors("4.0.0", "Onprem"), 0);
  EXPECT_EQ(status_errors("4.0.0", "Available on-premise"), 0);
  EXPECT_EQ(status_errors("4.0.0", "on premise"), 1);
  EXPECT_EQ(status_errors("4.1.0", "Available on-premise"), 0);
  EXPECT_EQ(status_errors("4.1.0", "onprem"), 1);
  EXPECT_EQ(status_errors("6.1.0", "Preview"), 0);
  EXPECT_EQ(status_errors("6.1.0", 3), 1);
  json description = complete_description();
  description["status"] = "available";
  const auto findings = check_system_description(description, "s.json", load_ruleset("5.0.0").system_description);
  EXPECT_NE(find_finding(findings, Severity::kError,
                         "field 'status' is \"available\"; the round's system_desc_checker "
                         "wants one of 'Available on-premise', 'Available cloud'"),
            nullptr)
      << dump(findings);
}

TEST(SystemDescription, UnreadableFilesAreFindings) {
  testing::ScratchFolder folder;
  testing::write_text(folder / "bad.json", "{\"submitter\": ");
  const auto broken = check_system_description_file(folder / "bad.json", rules());
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_NE(broken[0].message.find("invalid JSON"), std::string::npos);
  EXPECT_EQ(check_system_description_file(folder / "missing.json", rules())[0].message,
            "cannot read the system description");
}

// A fake machine: two sockets of 2 cores with hyper-threading, caches, 16 GiB, Debian, one GPU.
HostProbe fake_host(const testing::ScratchFolder& root) {
  std::string cpuinfo;
  for (int cpu = 0; cpu < 8; ++cpu) {
    cpuinfo += "processor\t: " + std::to_string(cpu) +
               "\nmodel name\t: Example CPU 9000 @ 3.00GHz\nphysical id\t: " + std::to_string(cpu / 4) +
               "\ncpu cores\t: 2\ncpu MHz\t\t: 2999.998\n\n";
  }
  testing::write_text(root / "proc/cpuinfo", cpuinfo);
  testing::write_text(root / "proc/meminfo", "MemTotal:       16777216 kB\nMemFree:         1000 kB\n");
  testing::write_text(root / "proc/sys/kernel/osrelease", "6.1.0-test\n");
  testing::write_text(root / "etc/os-release", "NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n");
  testing::write_text(root / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "3500000\n");
  const std::string cache = root / "sys/devices/system/cpu/cpu0/cache/";
  const std::vector<std::vector<std::string>> caches = {
      {"1", "Data", "48K"}, {"1", "Instruction", "32K"}, {"2", "Unified", "2048K"}, {"3", "Unified", "36864K"}};
  for (size_t i = 0; i < caches.size(); ++i) {
    testing::write_text(cache + "index" + std::to_string(i) + "/level", caches[i][0] + "\n");
    testing::write_text(cache + "index" + std::to_string(i) + "/type", caches[i][1] + "\n");
    testing::write_text(cache + "index" + std::to_string(i) + "/size", caches[i][2] + "\n");
  }
  HostProbe probe;
  probe.root = root.path();
  probe.storage_path = root.path();
  probe.run_command = [](const std::string& command) -> std::optional<std::string> {
    if (command.find("name,memory.total") != std::string::npos) return "NVIDIA H100 80GB HBM3, 81559 MiB\n";
    if (command.find("driver_version") != std::string::npos) return "550.54.15\n";
    return std::nullopt;
  };
  return probe;
}

TEST(DescribeHost, DetectsWhatTheMachineKnowsAndTakesTheRest) {
  testing::ScratchFolder root;
  const HostProbe probe = fake_host(root);
  const auto description = describe_host(probe, rules(), {{"submitter", "Example Org"}, {"cooling", "air"}});
  ASSERT_EQ(description.size(), 33u);
  size_t i = 0;
  for (const auto& [field, value] : description.items()) EXPECT_EQ(field, rules().fields[i++]);  // in the rules' order
  EXPECT_EQ(description["host_processor_model_name"], "Example CPU 9000 @ 3.00GHz");
  EXPECT_EQ(description["host_processors_per_node"], "2");
  EXPECT_EQ(description["host_processor_core_count"], "2");
  EXPECT_EQ(description["host_processor_vcpu_count"], "8");
  EXPECT_EQ(description["host_processor_frequency"], "3.50 GHz");
  EXPECT_EQ(description["host_processor_caches"],
            "L1d 48K, L1i 32K, L2 2048K, L3 36864K (per core or shared, as Linux reports them)");
  EXPECT_EQ(description["host_memory_capacity"], "16.0 GiB");
  EXPECT_EQ(description["operating_system"], "Debian GNU/Linux 12 (bookworm), Linux 6.1.0-test");
  EXPECT_EQ(description["accelerators_per_node"], "1");
  EXPECT_EQ(description["accelerator_model_name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(description["accelerator_memory_capacity"], "81559 MiB");
  EXPECT_EQ(description["other_software_stack"]["nvidia_driver_version"], "550.54.15");
  EXPECT_EQ(description["number_of_nodes"], "1");
  EXPECT_EQ(description["submitter"], "Example Org");
  EXPECT_EQ(description["cooling"], "air");
  EXPECT_EQ(description["division"], "");  // not detectable and not given
  EXPECT_NE(description["host_storage_capacity"], "");
  EXPECT_NE(description["framework"].get<std::string>().find("LibTorch"), std::string::npos);
  // What `trainbench system` writes passes `trainbench review`.
  EXPECT_TRUE(check_system_description(json::parse(description.dump()), "s.json", rules()).empty());
}

TEST(DescribeHost, WithoutNvidiaSmiThereAreNoAccelerators) {
  testing::ScratchFolder root;
  HostProbe probe = fake_host(root);
  probe.run_command = [](const std::string&) { return std::optional<std::string>(); };
  const auto description = describe_host(probe, rules(), {});
  EXPECT_EQ(description["accelerators_per_node"], "0");
  EXPECT_EQ(description["accelerator_model_name"], "");
  EXPECT_EQ(hardware_label(json::parse(description.dump())), "CPU: Example CPU 9000 @ 3.00GHz");
}

}  // namespace
}  // namespace trainbench::review
