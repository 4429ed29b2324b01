// `pdserve`: the project's CLI. Subcommands:
//   run           generate from one prompt in this process (no servers)
//   bench-engine  engine throughput: pp512, tg128, batched decode
#include <cstdio>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "glog/logging.h"
#include "tools/bench_engine.h"
#include "tools/run_command.h"

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pdserve <command> [flags]\n  run           generate in this process\n"
      "  bench-engine  measure engine throughput");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (args.size() < 2) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  const std::string cmd = args[1];
  absl::Status status;
  if (cmd == "run") {
    status = pdserve::RunCommand();
  } else if (cmd == "bench-engine") {
    status = pdserve::BenchEngineCommand();
  } else {
    std::fprintf(stderr, "unknown command '%s'\n%s\n", cmd.c_str(),
                 absl::ProgramUsageMessage().data());
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "pdserve %s: %s\n", cmd.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}
