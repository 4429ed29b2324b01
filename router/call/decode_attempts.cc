#include "router/call/decode_attempts.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/grpc_status.h"
#include "router/call/worker_failure.h"

namespace pdserve::router {

bool DecodeAttempts::IsRetryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         status.error_code() == grpc::StatusCode::UNAVAILABLE;
}

void DecodeAttempts::RecordRefusal(const std::string& address, const grpc::Status& status) {
  excluded_.push_back(address);
  reasons_.push_back(absl::StrCat(address, ": ", StatusCodeName(status.error_code()), ": ",
                                  status.error_message()));
  any_unavailable_ |= status.error_code() == grpc::StatusCode::UNAVAILABLE;
}

grpc::Status DecodeAttempts::PlacementFailure(const absl::Status& placement_error) const {
  if (reasons_.empty()) return ToGrpcStatus(placement_error);
  const grpc::StatusCode code =
      any_unavailable_ ? grpc::StatusCode::UNAVAILABLE : grpc::StatusCode::RESOURCE_EXHAUSTED;
  return grpc::Status(code, absl::StrCat("no decode worker could take the request (",
                                         absl::StrJoin(reasons_, "; "), ")"));
}

}  // namespace pdserve::router
