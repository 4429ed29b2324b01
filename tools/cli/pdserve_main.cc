// `pdserve`: the project's CLI. Subcommands:
//   run           generate from one prompt in this process (no servers)
//   bench-engine  engine throughput: pp512, tg128, batched decode
//   up            start a local cluster (router + prefill + decode) on loopback
//   generate      stream an answer from a router
//   bench         serving benchmark against a router (docs/PERFORMANCE.md)
//   random-model  write a SmolLM2-shaped GGUF with random weights
#include <cstdio>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/base/program_flags.h"
#include "common/rpc/grpc_server.h"
#include "glog/logging.h"
#include "tools/cli/bench_command.h"
#include "tools/cli/bench_engine.h"
#include "tools/cli/cluster_commands.h"
#include "tools/cli/random_model_command.h"
#include "tools/cli/run_command.h"

int main(int argc, char** argv) {
  pdserve::InitProgramFlags(
      "pdserve <command> [flags]\n  run           generate in this process\n"
      "  bench-engine  measure engine throughput\n"
      "  up            start router + prefill + decode on loopback\n"
      "  generate      stream an answer: pdserve generate [--router=A] \"prompt\"\n"
      "  bench         serving benchmark: pdserve bench --router=A --request_rate=R "
      "--num_requests=N\n"
      "  random-model  write a SmolLM2-shaped random GGUF: pdserve random-model --out=F");
  pdserve::BlockTerminationSignals();
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
  } else if (cmd == "up") {
    status = pdserve::UpCommand();
  } else if (cmd == "bench") {
    status = pdserve::BenchCommand();
  } else if (cmd == "random-model") {
    status = pdserve::RandomModelCommand();
  } else if (cmd == "generate") {
    status = pdserve::GenerateCommand(std::vector<std::string>(args.begin() + 2, args.end()));
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
