// `pdserve run`: one prompt through the engine in this process, no servers.
#ifndef PDSERVE_TOOLS_CLI_RUN_COMMAND_H_
#define PDSERVE_TOOLS_CLI_RUN_COMMAND_H_

#include "absl/status/status.h"

namespace pdserve {

absl::Status RunCommand();

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_RUN_COMMAND_H_
