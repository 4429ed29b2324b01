// `pdserve up` (a local cluster on loopback) and `pdserve generate` (a
// client of the router's Generation API).
#ifndef PDSERVE_TOOLS_CLI_CLUSTER_COMMANDS_H_
#define PDSERVE_TOOLS_CLI_CLUSTER_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pdserve {

absl::Status UpCommand();
absl::Status GenerateCommand(const std::vector<std::string>& args);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_CLUSTER_COMMANDS_H_
