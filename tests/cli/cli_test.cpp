// The trainbench binary as a user meets it: help, clear errors with exit code 2, and an interrupted run
// that ends its log with run_stop "aborted" and exits non-zero.
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/trainbench_binary.h"
#include "util/atomic_file.h"

namespace {

namespace fs = std::filesystem;

using Result = trainbench::testing::BinaryResult;

// Files under `dir` (result logs, partials): a refused run must leave none.
int files_under(const fs::path& dir) {
  int files = 0;
  if (fs::exists(dir))
    for (const auto& entry : fs::recursive_directory_iterator(dir)) files += entry.is_regular_file();
  return files;
}

Result run(const std::string& arguments) { return trainbench::testing::run_trainbench(arguments); }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trainbench_cli_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `run <benchmark> <flags> --system box --out dir_/name`, which must not fail but may stop short of the
  // target, and the value of the first eval_accuracy its log holds ("none" without one).
  std::string first_evaluation(const std::string& benchmark, const std::string& name, const std::string& flags) const {
    const Result result = run("run " + benchmark + " " + flags + " --system box --out " + (dir_ / name).string());
    EXPECT_LE(result.exit_code, 1) << result.output;
    const std::string log = trainbench::read_file((dir_ / name / "box" / benchmark / "result_0.txt").string());
    const size_t line = log.find("\"key\": \"eval_accuracy\"");
    if (line == std::string::npos) return "none";
    const size_t value = log.find("\"value\": ", line) + 10;
    return log.substr(value, log.find(", \"metadata\"", value) - value);
  }

  fs::path dir_;
};

TEST_F(CliTest, HelpExplainsEveryRunFlag) {
  const Result result = run("run --help");
  EXPECT_EQ(result.exit_code, 0);
  for (const char* flag : {"--preset", "--data", "--runs", "--out", "--system", "--seed", "--threads", "--set",
                           "--skip-corrupt", "--device", "--org", "--division", "--status"})
    EXPECT_NE(result.output.find(flag), std::string::npos) << flag;
}

// Every list of benchmarks a user sees comes from the registry.
TEST_F(CliTest, HelpTextsListTheRegisteredBenchmarks) {
  const Result listing = run("benchmarks");
  EXPECT_EQ(listing.exit_code, 0);
  for (const char* command : {"run --help", "bench --help", "data make --help"}) {
    const Result help = run(command);
    EXPECT_EQ(help.exit_code, 0) << command;
    for (const char* benchmark : {"resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm", "minigo", "gpt3"}) {
      EXPECT_NE(help.output.find(benchmark), std::string::npos) << command << " omits " << benchmark;
      EXPECT_NE(listing.output.find(std::string(benchmark) + " "), std::string::npos) << "benchmarks omits " << benchmark;
    }
  }
  const Result prepare = run("data prepare --help");
  EXPECT_NE(prepare.output.find("Benchmark (unet3d, rnnt, dlrm, gpt3)"), std::string::npos) << prepare.output;
}

// bench --plan: the dry plan of a layout without allocating it (GPT-3 175B over 512 ranks here), and bad layouts
// refused by the flag or the setting that does not divide.
TEST_F(CliTest, BenchPlanPrintsALayoutsDryPlanAndRefusesBadOnesByName) {
  Result result = run("bench gpt3 --preset reference --plan tp=8,pp=8,dp=8");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("tp=8 pp=8 dp=8 1f1b over 512 ranks"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("  stage 7 (each of its 8 tensor-parallel rank(s)): 2797590528 parameters"),
            std::string::npos)
      << result.output;
  const std::vector<std::pair<std::string, std::string>> refusals = {
      {"tp=8,pp=8", "--plan: expected tp=T,pp=P,dp=D, all three; got \"tp=8,pp=8\""},
      {"tp=0,pp=1,dp=1", "--plan: tp must be a whole number from 1 to 65536, got \"0\""},
      {"tp=8,pp=8,ep=1", "--plan: expected tp=T,pp=P,dp=D; \"ep=1\" is none of them"},
      {"tp=5,pp=8,dp=1", "gpt3/reference: heads: 96 is not divisible by tensor_parallel 5"}};
  for (const auto& [plan, message] : refusals) {
    result = run("bench gpt3 --preset reference --plan " + plan);
    EXPECT_EQ(result.exit_code, 2) << plan;
    EXPECT_NE(result.output.find(message), std::string::npos) << result.output;
  }
}

TEST_F(CliTest, BadInputGetsAClearErrorAndExitCode2) {
  Result result = run("run imagenet");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("benchmark 'imagenet': unknown (expected one of: resnet, ssd, maskrcnn, unet3d, rnnt, "
                               "bert, dlrm, minigo, gpt3)"),
            std::string::npos)
      << result.output;

  result = run("run resnet --preset huge");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--preset: 'huge' is not a preset of resnet (expected one of: mini, reference, tiny)"),
            std::string::npos)
      << result.output;

  result = run("run resnet --set batch_size=abc --data " + dir_.string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--set batch_size: expected an integer, got a string"), std::string::npos) << result.output;

  result = run("run resnet --preset reference");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--data: preset 'reference' of resnet trains on the real dataset"), std::string::npos) << result.output;

  result = run("run resnet --no-such-flag");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--no-such-flag"), std::string::npos) << result.output;

  result = run("run resnet --runs 0");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--runs: expected a whole number of at least 1, got '0'"), std::string::npos) << result.output;
}

// Issue 18: every numeric flag refuses a bad value with a plain message and exit code 2 (CLI11's own checks
// printed a 300-digit range and exited 105), and --threads is bounded by the machine.
TEST_F(CliTest, EveryNumericFlagRefusesBadValuesPlainly) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run dlrm --runs -1", "--runs: expected a whole number of at least 1, got '-1'"},
      {"run dlrm --runs x", "--runs: expected a whole number of at least 1, got 'x'"},
      {"run dlrm --seed -1", "--seed: expected a whole number from 0 to 2147483647, got '-1'"},
      {"run dlrm --threads 100000", "--threads: at most "},
      {"run dlrm --threads 0", "--threads: expected a whole number of at least 1, got '0'"},
      {"run dlrm --comm-timeout 0", "--comm-timeout: expected a number above 0, got '0'"},
      {"run dlrm --comm-timeout nan", "--comm-timeout: expected a number above 0, got 'nan'"},
      {"bench dlrm --steps 0", "--steps: expected a whole number of at least 1, got '0'"},
      {"bench dlrm --warmup -2", "--warmup: expected a whole number of at least 0, got '-2'"},
      {"data make dlrm --out x --seed -3", "--seed: expected a whole number of at least 0, got '-3'"},
      {"launch --nproc 0 -- run dlrm", "--nproc: expected a whole number from 1 to 4096, got '0'"},
      {"launch --master-port 70000 -- run dlrm", "--master-port: expected a whole number from 1 to 65535, got '70000'"},
      {"launch --grace -1 -- run dlrm", "--grace: expected a number of at least 0, got '-1'"},
      {"probe comm -n 0", "--iters: expected a whole number of at least 1, got '0'"},
      {"probe comm -f 1", "--stepfactor: expected a number above 1, got '1'"},
      {"probe compute --threads 100000", "--threads: at most "},
      {"probe storage --dir . --threads 0", "--threads: expected a whole number from 1 to 1024, got '0'"},
  };
  for (const auto& [arguments, message] : cases) {
    const Result result = run(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.output;
    EXPECT_NE(result.output.find(message), std::string::npos) << arguments << "\n" << result.output;
    EXPECT_EQ(result.output.find("179769"), std::string::npos) << arguments;
  }
}

// Issue 18: input that used to end in `terminate called` (rc 134) is a named error with exit code 2.
TEST_F(CliTest, InputThatUsedToCrashIsANamedError) {
  const std::string out = " --quiet --out " + (dir_ / "results").string() + " --system box";
  Result result = run("run resnet --preset tiny --set stage_widths=[] --data " + dir_.string() + out);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--set stage_widths=[]: expected a list of 1 to 8 values, each an integer from 1 to 2048, got []"), std::string::npos)
      << result.output;
  result = run("run dlrm --preset tiny --org \"$(printf '\\377\\376')\" --data " + dir_.string() + out);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--org: not valid UTF-8 text"), std::string::npos) << result.output;
  result = run("run dlrm --preset tiny --data " + dir_.string() + "/\"$(printf '\\377')\"" + out);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("dataset directory does not exist"), std::string::npos) << result.output;
  result = run("run dlrm --preset tiny --data " + dir_.string() + " --quiet --out " + (dir_ / std::string(5000, 'o')).string());
  EXPECT_EQ(result.exit_code, 2) << result.output.substr(0, 300);
  EXPECT_NE(result.output.find("File name too long"), std::string::npos) << result.output.substr(0, 300);
  EXPECT_EQ(files_under(dir_ / "results"), 0);
}

// Issue 32's settings that crashed, hung, ran away or ended in a committed log: each is refused by its rule,
// naming the setting, before a dataset is generated or a results folder made.
TEST_F(CliTest, SettingsOutsideTheirRulesAreRefusedByNameBeforeAnythingIsWritten) {
  const std::string out = " --quiet --threads 1 --data-root " + (dir_ / "data").string() + " --out " + (dir_ / "results").string();
  // One or two settings a benchmark (each run costs LibTorch's start-up): the path from --set to the refusal before
  // any work is each benchmark's own, the rules' checks are one engine's (harness.SettingRules.*).
  for (const std::string setting :
       {"unet3d validation_overlap=1", "unet3d start_eval_at=0", "rnnt loader_workers=100000", "rnnt ema=2",
        "ssd loader_threads=100000", "ssd score_threshold=2", "maskrcnn fpn_channels=0", "minigo board_size=0",
        "minigo komi=1e308", "resnet eval_interval_epochs=0", "bert max_samples=0", "dlrm batch_size=-5",
        "gpt3 max_samples=0"}) {
    const std::string benchmark = setting.substr(0, setting.find(' ')), assignment = setting.substr(setting.find(' ') + 1);
    const Result result = run("run " + benchmark + " --preset tiny --set " + assignment + out);
    EXPECT_EQ(result.exit_code, 2) << setting << ": " << result.output;
    EXPECT_NE(result.output.find("trainbench: --set " + assignment + ": expected "), std::string::npos) << result.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "results"));
  EXPECT_FALSE(fs::exists(dir_ / "data"));
}

TEST_F(CliTest, HelpSettingsPrintsEverySettingWithItsRangeAndMeaning) {
  const Result result = run("run unet3d --preset tiny --help-settings");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("Settings of unet3d/tiny"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("\n  batch_size = 8\n      an integer from 1 to "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("\n  precision = \"fp32\"\n      one of fp32, bf16, fp16. Training precision"), std::string::npos)
      << result.output;
}

// Issue 18: a system name is one folder under --out, never a way out of it.
TEST_F(CliTest, SystemNameMustBeOnePathComponent) {
  for (const std::string name : {"../../escape", "a/b", "..", "\"$(printf 'line\\nbreak')\"", "''"}) {
    const Result result = run("run dlrm --preset tiny --quiet --data " + dir_.string() + " --out " + (dir_ / "results").string() +
                              " --system " + name);
    EXPECT_EQ(result.exit_code, 2) << name << "\n" << result.output;
    EXPECT_NE(result.output.find("--system"), std::string::npos) << name << "\n" << result.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "results"));  // refused before anything was created
  EXPECT_FALSE(fs::exists(dir_.parent_path() / "escape"));
}

// Issue 18: a refused run commits no result_N.txt, and concurrent runs into one --out each end with their
// own complete log. The dlrm tiny set, with a target the first evaluation reaches, keeps each run short.
TEST_F(CliTest, RefusedRunsLeaveNoResultAndConcurrentRunsEachCommitTheirOwn) {
  const std::string data = (dir_ / "data").string(), out = (dir_ / "results").string();
  ASSERT_EQ(run("data make dlrm --preset tiny --out " + data).exit_code, 0);
  const std::string flags = "run dlrm --preset tiny --quiet --threads 1 --out " + out + " --system box";
  Result result = run(flags + " --data " + data + " --set batch_size=-5");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--set batch_size=-5: expected an integer from 1 to 1048576, got -5"), std::string::npos) << result.output;
  result = run(flags + " --data " + data + " --set gradient_accumulation_steps=3");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("dlrm/tiny: batch_size: 512 (the global batch) does not divide into 1 rank(s) x 3 "
                               "(gradient_accumulation_steps) micro-batches"),
            std::string::npos)
      << result.output;
  result = run(flags + " --data " + data + " --precision fp16 --device cpu");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("dlrm/tiny: precision: fp16 (autocast with dynamic loss scaling) needs a CUDA device"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(out)) << "a refused run made its results folder";
  result = run(flags + " --data " + (dir_ / "nowhere").string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find((dir_ / "nowhere").string() + ": dataset directory does not exist"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(out)) << "a run refused for its data left its results folders";

  constexpr int kRuns = 4;
  std::string script;
  for (int run = 0; run < kRuns; ++run)
    script += std::string(TRAINBENCH_BINARY) + " " + flags + " --data " + data + " --set target=0.51 --seed " + std::to_string(run) +
              " > " + (dir_ / ("run" + std::to_string(run) + ".txt")).string() + " 2>&1 & ";
  ASSERT_EQ(::system((script + "wait").c_str()), 0);
  std::set<std::string> seeds, printed_paths;
  for (int run = 0; run < kRuns; ++run) {
    const std::string log = trainbench::read_file((dir_ / ("results/box/dlrm/result_" + std::to_string(run) + ".txt")).string());
    const size_t seed = log.find("\"key\": \"seed\", \"value\": ");
    ASSERT_NE(seed, std::string::npos);
    seeds.insert(log.substr(seed + 24, 1));
    EXPECT_NE(log.substr(log.rfind(":::MLLOG")).find("\"status\": \"success\""), std::string::npos);
    const std::string summary = trainbench::read_file((dir_ / ("run" + std::to_string(run) + ".txt")).string());
    printed_paths.insert(summary.substr(summary.find(" -> ") + 4, summary.find('\n', summary.find(" -> ")) - summary.find(" -> ") - 4));
  }
  EXPECT_EQ(seeds.size(), static_cast<size_t>(kRuns)) << "a log holds another run's lines";
  EXPECT_EQ(printed_paths.size(), static_cast<size_t>(kRuns)) << "two runs printed the same result path";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "results/box/dlrm"), fs::directory_iterator()), kRuns);
}

TEST_F(CliTest, DataPrepareConvertsCriteoDayFilesAndExplainsBadInput) {
  std::string line = "1";
  for (int i = 0; i < 13; ++i) line += "\t" + std::to_string(i);
  for (int i = 0; i < 26; ++i) line += "\t0000abcd";
  for (const char* day : {"day_0", "day_1"}) std::ofstream(dir_ / day) << line << "\n" << line << "\n";
  Result result = run("data prepare dlrm --in " + dir_.string() + " --out " + (dir_ / "prepared").string());
  EXPECT_EQ(result.exit_code, 2);  // the reference preset names Criteo 1TB's 24 days
  EXPECT_NE(result.output.find((dir_ / "day_2").string() + ": missing (expected day_0 .. day_23, plain or .gz: the preset's 24 days)"),
            std::string::npos) << result.output;
  result = run("data prepare dlrm --set days=2 --in " + dir_.string() + " --out " + (dir_ / "prepared").string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::exists(dir_ / "prepared" / "train.bin"));
  EXPECT_TRUE(fs::exists(dir_ / "prepared" / "eval.bin"));

  std::ofstream(dir_ / "day_1", std::ios::app) << "1\t2\n";
  result = run("data prepare dlrm --set days=2 --in " + dir_.string() + " --out " + (dir_ / "again").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find((dir_ / "day_1").string() + ":3: short line: 2 tab-separated fields"), std::string::npos)
      << result.output;

  result = run("data prepare resnet --in " + dir_.string() + " --out " + (dir_ / "x").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("resnet: reads its dataset as published"), std::string::npos) << result.output;
}

// GPT-3's C4 preparation takes the SentencePiece model from --spm (as --set tokenizer_model), or from where the
// reference's README puts it; a benchmark that tokenizes nothing refuses the flag by name.
TEST_F(CliTest, DataPrepareGpt3TokenizesWithTheSpmModelGivenOrRefusesByName) {
  const fs::path c4 = dir_ / "c4";
  fs::create_directories(c4);
  std::ofstream text(dir_ / "text.txt");
  for (int i = 0; i < 200; ++i) text << "the river went down to the old house number " << i << " by the mill\n";
  text.close();
  const std::string prefix = (dir_ / "spm").string();
  ASSERT_EQ(std::system(("spm_train --input=" + (dir_ / "text.txt").string() + " --model_prefix=" + prefix +
                         " --vocab_size=60 --model_type=bpe --minloglevel=2 > /dev/null 2>&1")
                            .c_str()),
            0);
  std::ofstream(c4 / "c4-validation_24567exp.json") << R"({"text": "the old house by the river"})"
                                                    << "\n"
                                                    << R"({"text": "down to the mill"})"
                                                    << "\n";

  Result result = run("data prepare gpt3 --in " + c4.string() + " --out " + (dir_ / "none").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find((c4 / "tokenizers/c4_spm/sentencepiece.model").string() + ": is missing"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("or pass --spm MODEL"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "none"));

  result =
      run("data prepare gpt3 --in " + c4.string() + " --spm " + prefix + ".model --out " + (dir_ / "out").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("c4_en_validation_subset_c4_spm_text_document: 2 documents"), std::string::npos)
      << result.output;
  EXPECT_TRUE(fs::exists(dir_ / "out/c4_en_validation_subset_c4_spm_text_document.idx"));

  result = run("data prepare gpt3 --in " + c4.string() + " --spm " + (dir_ / "missing.model").string() + " --out " +
               (dir_ / "x").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--spm"), std::string::npos) << result.output;
  result = run("data prepare dlrm --in " + c4.string() + " --spm " + prefix + ".model --out " + (dir_ / "x").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--spm: dlrm tokenizes nothing"), std::string::npos) << result.output;
}

// Issue 45: a launcher variable that makes no sense is bad input (exit 2, naming it) before anything is written,
// even where the CLI's defaults read it (--threads divides the cores by LOCAL_WORLD_SIZE).
TEST_F(CliTest, BadRankVariablesAreRefusedByNameBeforeAnyWork) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"RANK=3 WORLD_SIZE=2", "environment variable RANK: 3 is not below WORLD_SIZE = 2"},
      {"RANK=0 WORLD_SIZE=0", "environment variable WORLD_SIZE: expected an integer from 1 to 1000000, got 0"},
      {"RANK=0 WORLD_SIZE=1 MASTER_PORT=99999", "environment variable MASTER_PORT: expected a port 1..65535"},
      {"RANK=abc WORLD_SIZE=2", "environment variable RANK: expected an integer, got \"abc\""},
      {"RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=0", "environment variable LOCAL_WORLD_SIZE: expected an integer from 1"},
      {"RANK=0 WORLD_SIZE=2147483647", "WORLD_SIZE: expected an integer from 1 to 1000000, got 2147483647"},
      {"RANK=0 WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2",
       "RANK/WORLD_SIZE and OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE: disagree (rank 0 of 2 against rank 1 of 2)"}};
  for (const auto& [environment, message] : cases) {
    const Result result =
        trainbench::testing::run_trainbench("run dlrm --preset tiny --out " + (dir_ / "results").string(), environment);
    EXPECT_EQ(result.exit_code, 2) << environment << "\n" << result.output;
    EXPECT_NE(result.output.find(message), std::string::npos) << environment << "\n" << result.output;
    EXPECT_FALSE(fs::exists(dir_ / "results")) << environment;
  }
}

// Issue 45: a file name with a newline and a forged log line in it is quoted on one line: nothing on stderr starts
// with `:::MLLOG` for a log scraper to read.
TEST_F(CliTest, AFileNameCannotForgeALogLineOnStderr) {
  const std::string name = (dir_ / "x\n:::MLLOG {\"key\": \"run_stop\", \"value\": null}").string();
  const Result result = run("review --log '" + name + "'");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_EQ(result.output.find("\n:::MLLOG"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("x\\x0A:::MLLOG"), std::string::npos) << result.output;
}

// Issue 45: paths a run writes to or starts from are checked before any training or dataset generation, named by
// their flag or setting, and a refused run commits no result.
TEST_F(CliTest, BadStartingAndOutputPathsAreRefusedByNameBeforeAnyWork) {
  const fs::path loop = dir_ / "loop";
  fs::create_symlink(loop, loop);
  std::ofstream(dir_ / "a-file") << "x";
  const std::string results = " --out " + (dir_ / "results").string() + " --data-root " + (dir_ / "data").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run minigo --preset tiny --set target_model=" + loop.string(),
       "minigo/tiny: target_model " + loop.string() + ": Too many levels of symbolic links"},
      {"run minigo --preset tiny --set target_model=" + (dir_ / std::string(300, 'n')).string(), "File name too long"},
      {"run dlrm --preset tiny --save-model " + (dir_ / "a-file").string(),
       "--save-model " + (dir_ / "a-file").string() + ": " + (dir_ / "a-file").string() + " is not a directory"},
      {"run bert --preset tiny --set init_checkpoint=/nonexistent/bert.pt",
       "bert/tiny: init_checkpoint /nonexistent/bert.pt: does not exist"}};
  for (const auto& [command, message] : cases) {
    const Result result = run(command + results);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.output;
    EXPECT_NE(result.output.find(message), std::string::npos) << command << "\n" << result.output;
    EXPECT_FALSE(fs::exists(dir_ / "results")) << command;
    EXPECT_FALSE(fs::exists(dir_ / "data")) << command << ": a dataset was generated first";
  }
}

// Issue 45: an output path holding a directory, device or FIFO is refused when the flags are read, before the
// model is built, and is left as it was.
TEST_F(CliTest, OutputsRefuseADirectoryDeviceOrFifoBeforeAnyWork) {
  fs::create_directories(dir_ / "folder");
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  std::ofstream(dir_ / "file") << "x";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"checkpoint export resnet --preset tiny --out " + (dir_ / "folder").string(), "folder is a directory"},
      {"checkpoint export resnet --preset tiny --out /dev/full", "/dev/full is a device"},
      {"checkpoint export resnet --preset tiny --out " + (dir_ / "fifo").string(), "fifo is a FIFO"},
      {"report " + dir_.string() + " --out " + (dir_ / "file").string(), "file is a file; give a folder"}};
  for (const auto& [command, message] : cases) {
    const Result result = run(command);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.output;
    EXPECT_NE(result.output.find(message), std::string::npos) << command << "\n" << result.output;
  }
  EXPECT_TRUE(fs::is_directory(dir_ / "folder") && fs::is_empty(dir_ / "folder"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 3) << "no partial left";
}

// Issue 18: a full disk while generating names the reason and leaves no half-written day file. The disk is a
// 256 KiB tmpfs mounted in a private mount namespace (CI runs as root); elsewhere the test says so and skips.
TEST_F(CliTest, DataMakeOnAFullDiskNamesTheReasonAndLeavesNoPartial) {
  const std::string disk = (dir_ / "disk").string();
  fs::create_directories(disk);
  if (std::system(("unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs " + disk + "' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs in a private mount namespace (needs root and unshare)";
  const std::string script = "unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs " + disk + " && " + TRAINBENCH_BINARY +
                             " data make dlrm --preset tiny --out " + disk + "/data; echo exit=$?; find " + disk +
                             " -name \"*.partial\"' 2>&1";
  FILE* pipe = ::popen(script.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  ::pclose(pipe);
  EXPECT_NE(output.find("write failed: No space left on device"), std::string::npos) << output;
  EXPECT_NE(output.find("exit=2"), std::string::npos) << output;
  EXPECT_EQ(output.find(".partial\n"), std::string::npos) << output;  // find printed no leftover
}

// Issue 27: a run started with --weights from `checkpoint export` of the same seed starts where that run
// starts (the same first evaluation); from another seed's file, elsewhere. --save-model keeps the trained model
// in the same format, and a file of another model is refused listing what does not fit.
TEST_F(CliTest, ARunFromAnExportedInitializationLogsTheSameFirstEvaluation) {
  const std::string data = (dir_ / "data").string();
  ASSERT_EQ(run("data make resnet --preset tiny --set dataset.train_per_class=64 --set dataset.val_per_class=16 --out " + data).exit_code, 0);
  for (const int seed : {5, 6}) {
    const Result exported = run("checkpoint export resnet --preset tiny --seed " + std::to_string(seed) + " --out " +
                                (dir_ / ("seed" + std::to_string(seed) + ".pt")).string());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
  }
  const auto first_eval = [&](const std::string& name, const std::string& flags) {
    return first_evaluation("resnet", name, "--preset tiny --quiet --threads 1 --seed 5 --set max_epochs=1 --data " + data + flags);
  };
  const std::string own = first_eval("own", " --save-model " + (dir_ / "trained").string()),
                    imported = first_eval("imported", " --weights " + (dir_ / "seed5.pt").string()),
                    other = first_eval("other", " --weights " + (dir_ / "seed6.pt").string());
  EXPECT_NE(own, "none");
  EXPECT_EQ(own, imported);
  EXPECT_NE(own, other);
  // --save-model kept the trained model in the same format: it is a state dict this model takes.
  const std::string trained = (dir_ / "trained" / "resnet_seed5.pt").string();
  ASSERT_TRUE(fs::exists(trained));
  const Result reloaded = run("checkpoint export resnet --preset tiny --weights " + trained + " --out " + (dir_ / "again.pt").string());
  EXPECT_EQ(reloaded.exit_code, 0) << reloaded.output;
  EXPECT_EQ(trainbench::read_file(trained), trainbench::read_file((dir_ / "again.pt").string()));

  ASSERT_EQ(run("checkpoint export unet3d --preset tiny --out " + (dir_ / "unet3d.pt").string()).exit_code, 0);
  const Result refused = run("checkpoint export resnet --preset tiny --weights " + (dir_ / "unet3d.pt").string() + " --out " + (dir_ / "y.pt").string());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("does not fit this model's"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir_ / "y.pt"));
}

// DLRM's state dict has DLRM_Net's names: a run from the exported initialization logs the same first AUC as
// the run of that seed, --save-model keeps the trained model, and the tables must be whole on each rank.
TEST_F(CliTest, ADlrmRunFromAnExportedStateDictLogsTheSameFirstEvaluation) {
  const std::string data = (dir_ / "data").string();
  ASSERT_EQ(run("data make dlrm --preset tiny --out " + data).exit_code, 0);
  for (const int seed : {5, 6})
    ASSERT_EQ(run("checkpoint export dlrm --preset tiny --seed " + std::to_string(seed) + " --out " +
                  (dir_ / ("seed" + std::to_string(seed) + ".pt")).string())
                  .exit_code,
              0);
  const auto first_eval = [&](const std::string& name, const std::string& flags) {
    return first_evaluation("dlrm", name, "--preset tiny --quiet --threads 1 --seed 5 --data " + data + flags);
  };
  const std::string own = first_eval("own", " --save-model " + (dir_ / "trained").string()),
                    imported = first_eval("imported", " --weights " + (dir_ / "seed5.pt").string()),
                    other = first_eval("other", " --weights " + (dir_ / "seed6.pt").string());
  EXPECT_NE(own, "none");
  EXPECT_EQ(own, imported);
  EXPECT_NE(own, other);
  const std::string trained = (dir_ / "trained" / "dlrm_seed5.pt").string();
  ASSERT_TRUE(fs::exists(trained));
  const Result reloaded = run("checkpoint export dlrm --preset tiny --weights " + trained + " --out " + (dir_ / "again.pt").string());
  EXPECT_EQ(reloaded.exit_code, 0) << reloaded.output;
  EXPECT_EQ(trainbench::read_file(trained), trainbench::read_file((dir_ / "again.pt").string()));
}

// Mask R-CNN's state dict has GeneralizedRCNN's names: a run from the exported initialization logs the same
// first box and mask mAP as the run of that seed; --weights replaces the preset's backbone_weights.
TEST_F(CliTest, AMaskRcnnRunFromAnExportedStateDictLogsTheSameFirstEvaluation) {
  const std::string data = (dir_ / "data").string();
  ASSERT_EQ(run("data make maskrcnn --preset tiny --out " + data).exit_code, 0);
  for (const int seed : {5, 6})
    ASSERT_EQ(run("checkpoint export maskrcnn --preset tiny --seed " + std::to_string(seed) + " --out " +
                  (dir_ / ("seed" + std::to_string(seed) + ".pt")).string())
                  .exit_code,
              0);
  const std::string flags = "--preset tiny --quiet --threads 1 --seed 5 --set max_epochs=1 --data " + data;
  const std::string own = first_evaluation("maskrcnn", "own", flags),
                    imported = first_evaluation("maskrcnn", "imported", flags + " --weights " + (dir_ / "seed5.pt").string() +
                                                                            " --set backbone_weights=" + (dir_ / "missing.pkl").string()),
                    other = first_evaluation("maskrcnn", "other", flags + " --weights " + (dir_ / "seed6.pt").string());
  EXPECT_NE(own, "none");
  EXPECT_EQ(own, imported);
  EXPECT_NE(own, other);
}

// MiniGo's model files are minigo's own `.minigo` frozen graphs: a run from an exported initialization logs the
// same first evaluation and trains the same network as the run of that seed, --save-model writes a file that
// re-exports byte for byte, and a network of another preset's shape is refused as --weights and as target_model.
TEST_F(CliTest, AMinigoRunFromAnExportedMinigoFileLogsTheSameFirstEvaluation) {
  for (const int seed : {5, 6})
    ASSERT_EQ(run("checkpoint export minigo --preset tiny --seed " + std::to_string(seed) + " --out " +
                  (dir_ / ("seed" + std::to_string(seed) + ".minigo")).string())
                  .exit_code,
              0);
  const auto first_eval = [&](const std::string& name, const std::string& flags) {
    return first_evaluation("minigo", name, "--preset tiny --quiet --threads 1 --seed 5 --set max_generations=1" + flags);
  };
  // The win rate of a few games can tie by chance, so the trained networks are compared too.
  const auto trained = [&](const std::string& name) { return (dir_ / name / "minigo_seed5.minigo").string(); };
  const std::string own = first_eval("own", " --save-model " + (dir_ / "own").string()),
                    imported = first_eval("imported", " --weights " + (dir_ / "seed5.minigo").string() + " --save-model " +
                                                          (dir_ / "imported").string()),
                    other = first_eval("other", " --weights " + (dir_ / "seed6.minigo").string() + " --save-model " +
                                                    (dir_ / "other").string());
  EXPECT_NE(own, "none");
  EXPECT_EQ(own, imported);
  ASSERT_TRUE(fs::exists(trained("own")));
  EXPECT_EQ(trainbench::read_file(trained("own")), trainbench::read_file(trained("imported")));
  EXPECT_NE(trainbench::read_file(trained("own")), trainbench::read_file(trained("other")));
  ASSERT_EQ(run("checkpoint export minigo --preset tiny --weights " + trained("own") + " --out " + (dir_ / "again.minigo").string()).exit_code, 0);
  EXPECT_EQ(trainbench::read_file(trained("own")), trainbench::read_file((dir_ / "again.minigo").string()));

  ASSERT_EQ(run("checkpoint export minigo --preset mini --out " + (dir_ / "mini.minigo").string()).exit_code, 0);
  for (const std::string flag : {"--weights ", "--set target_model="}) {
    const Result refused = run("run minigo --preset tiny --quiet " + flag + (dir_ / "mini.minigo").string() + " --out " + (dir_ / "x").string());
    EXPECT_EQ(refused.exit_code, 2) << flag;
    EXPECT_NE(refused.output.find("mini.minigo: holds a 9x9 network of 32 filters, 3 blocks, fc width 32 on mlperf07 features; this "
                                  "preset plays 5x5, 16 filters, 2 blocks, fc width 16"),
              std::string::npos)
        << refused.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

// A run whose log review would refuse says so when it ends: here a weight decay the closed division does not
// allow (a power of two times 1e-4). The log is still written; a compliant run warns of nothing.
TEST_F(CliTest, ARunWhoseLogFailsReviewWarnsWithTheFinding) {
  const std::string data = (dir_ / "data").string();
  ASSERT_EQ(run("data make resnet --preset tiny --set dataset.train_per_class=32 --set dataset.val_per_class=8 --out " + data).exit_code, 0);
  const auto one_epoch = [&](const std::string& name, const std::string& flags) {
    return run("run resnet --preset tiny --quiet --threads 1 --seed 5 --set max_epochs=1 --data " + data + " --system box --out " +
               (dir_ / name).string() + flags);
  };
  const Result refused = one_epoch("odd", " --set weight_decay=0.0003");
  EXPECT_LE(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("warning: run 0: its log fails review: "), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("sgd_opt_weight_decay"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("`trainbench review --log " + (dir_ / "odd/box/resnet/result_0.txt").string() + "` lists every finding"),
            std::string::npos)
      << refused.output;
  const Result plain = one_epoch("plain", "");
  EXPECT_LE(plain.exit_code, 1) << plain.output;
  EXPECT_EQ(plain.output.find("fails review"), std::string::npos) << plain.output;
}

TEST_F(CliTest, MissingDatasetNamesTheDirectoryAndWritesNoResult) {
  const Result result = run("run resnet --quiet --seed 1 --data " + (dir_ / "nowhere").string() + " --out " + (dir_ / "results").string() +
                            " --system box");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find((dir_ / "nowhere").string() + ": dataset directory does not exist"), std::string::npos) << result.output;
  EXPECT_EQ(files_under(dir_ / "results"), 0);
}

TEST_F(CliTest, SigtermAbortsTheRunWithACompleteLog) {
  ASSERT_EQ(run("data make resnet --set dataset.train_per_class=64 --set dataset.val_per_class=16 --out " + (dir_ / "data").string()).exit_code, 0);
  // Issue 18: the error names the preset's setting, not the loader's field ("workers"); issue 32: with its range.
  const Result refused = run("run resnet --quiet --set loader_threads=0 --data " + (dir_ / "data").string() + " --out " +
                             (dir_ / "results").string() + " --system box");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("--set loader_threads=0: expected an integer from 1 to 1024, got 0"), std::string::npos) << refused.output;
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string data = (dir_ / "data").string(), out = (dir_ / "results").string();
    const int summary = ::open((dir_ / "stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (summary < 0 || ::dup2(summary, STDOUT_FILENO) < 0) ::_exit(126);
    ::execl(TRAINBENCH_BINARY, TRAINBENCH_BINARY, "run", "resnet", "--quiet", "--threads", "1", "--seed", "5", "--data",
            data.c_str(), "--out", out.c_str(), "--system", "box", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const fs::path partial = dir_ / "results/box/resnet/result_0.txt.partial";
  // Wait until the run is on the clock (its log has run_start), then interrupt it.
  for (int i = 0; i < 600; ++i) {
    if (fs::exists(partial) && trainbench::read_file(partial.string()).find("\"run_start\"") != std::string::npos) break;
    ::usleep(50 * 1000);
  }
  ::usleep(500 * 1000);
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_FALSE(fs::exists(partial));
  const std::string log = trainbench::read_file((dir_ / "results/box/resnet/result_0.txt").string());
  const auto last_line = log.substr(log.rfind(":::MLLOG", log.size() - 2));
  EXPECT_NE(last_line.find("\"key\": \"run_stop\""), std::string::npos) << last_line;
  EXPECT_NE(last_line.find("\"status\": \"aborted\", \"error\": \"interrupted by signal 15\""), std::string::npos) << last_line;
  // The summary line tells an interrupted run from one that did not converge.
  const std::string summary = trainbench::read_file((dir_ / "stdout.txt").string());
  EXPECT_NE(summary.find("run 0 (seed 5): was aborted by signal 15 before reaching the target"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("did NOT reach"), std::string::npos) << summary;
}

}  // namespace
