// pdserve-router: the public Generation API in front of the prefill and
// decode tiers (docs/protocol/public-api.md). All logic lives in the pdserve_router library.
#include <cstdlib>

#include "absl/flags/parse.h"
#include "common/base/program_flags.h"
#include "glog/logging.h"
#include "router/router_flags.h"
#include "router/router_server.h"

int main(int argc, char** argv) {
  pdserve::InitProgramFlags(
      "pdserve-router --model=M.gguf --decode=host:port,... [--prefill=host:port,...]");
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  absl::StatusOr<pdserve::router::RouterConfig> config = pdserve::router::RouterConfigFromFlags();
  absl::Status status = config.ok() ? pdserve::router::Run(*config) : config.status();
  if (!status.ok()) {
    LOG(ERROR) << status;
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
