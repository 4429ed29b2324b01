#include "common/runtime/device_spec.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pdserve {

std::string DeviceSpec::ToString() const {
  return is_cuda() ? absl::StrCat("cuda:", ordinal) : "cpu";
}

absl::StatusOr<DeviceSpec> DeviceSpec::Parse(absl::string_view text) {
  DeviceSpec spec;
  if (text == "cpu") return spec;
  spec.kind = Kind::kCuda;
  if (text == "cuda") return spec;
  int ordinal = -1;
  if (absl::ConsumePrefix(&text, "cuda:") && !text.empty() && text.size() <= 4 &&
      text.find_first_not_of("0123456789") == absl::string_view::npos &&
      absl::SimpleAtoi(text, &ordinal)) {
    spec.ordinal = ordinal;
    return spec;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device \"", text, "\" is not one of cpu, cuda, cuda:N"));
}

}  // namespace pdserve
