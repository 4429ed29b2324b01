// Early-return helpers for absl::Status / absl::StatusOr, in the style of
// the macros used inside Google and abseil-based projects. They keep the
// error path to one line so functions stay short.
#ifndef PDSERVE_COMMON_BASE_STATUS_MACROS_H_
#define PDSERVE_COMMON_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PDS_CONCAT_INNER_(a, b) a##b
#define PDS_CONCAT_(a, b) PDS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function when it is not OK.
#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    ::absl::Status pds_status_ = (expr);      \
    if (!pds_status_.ok()) return pds_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns the status,
// otherwise moves the value into `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(PDS_CONCAT_(pds_statusor_, __LINE__), lhs, rexpr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                           \
  if (!statusor.ok()) return statusor.status();      \
  lhs = std::move(statusor).value()

#endif  // PDSERVE_COMMON_BASE_STATUS_MACROS_H_
