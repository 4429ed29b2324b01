// GenerateClient: a small synchronous client of the public Generation API,
// used by `pdserve generate`, `pdserve up` (its demo answer) and tests.
#ifndef PDSERVE_TOOLS_CLI_GENERATE_CLIENT_H_
#define PDSERVE_TOOLS_CLI_GENERATE_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "tools/bench/client_security.h"

namespace pdserve {

struct GenerateResult {
  std::string text;
  std::vector<int32_t> token_ids;
  v1::Started started;
  v1::Finished finished;
};

class GenerateClient {
 public:
  explicit GenerateClient(const std::string& address, ClientSecurity security = {});

  // Streams one request; `on_text` sees each text chunk as it arrives.
  absl::StatusOr<GenerateResult> Generate(const v1::GenerateRequest& request,
                                          absl::Duration timeout,
                                          const std::function<void(const std::string&)>& on_text);
  // Polls GetModelInfo until it answers (the cluster is up) or `timeout`.
  absl::Status WaitReady(absl::Duration timeout);

 private:
  ClientSecurity security_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_GENERATE_CLIENT_H_
