#include "router/call/worker_failure.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pdserve::router {

std::string StatusCodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

grpc::Status WorkerFailureStatus(const char* role, const std::string& address,
                                 const grpc::Status& status) {
  grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE;
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::FAILED_PRECONDITION:
      code = status.error_code();
      break;
    default:
      break;
  }
  return grpc::Status(code, absl::StrCat(role, " worker ", address,
                                         " failed: ", StatusCodeName(status.error_code()), ": ",
                                         status.error_message()));
}

}  // namespace pdserve::router
