#include "common/rpc/port_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace pdserve {
namespace {

bool ValidPort(int port) { return port >= 0 && port <= 65535; }

}  // namespace

absl::Status WritePortFile(const std::string& path, const BoundPorts& ports) {
  if (path.empty()) return absl::OkStatus();
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "grpc=" << ports.grpc << "\nmetrics=" << ports.metrics << "\nkv=" << ports.kv
        << "\nhttp=" << ports.http << "\n";
    out.flush();
    if (!out) return absl::InternalError(absl::StrCat("--port_file: cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("--port_file: cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<BoundPorts> ReadPortFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " does not exist (yet)"));
  std::stringstream text;
  text << in.rdbuf();
  BoundPorts ports;
  ports.grpc = -1;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, '=');
    int value = -1;
    if (!absl::SimpleAtoi(kv.second, &value) || !ValidPort(value)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad line '", line, "'"));
    }
    if (kv.first == "grpc") ports.grpc = value;
    if (kv.first == "metrics") ports.metrics = value;
    if (kv.first == "kv") ports.kv = value;
    if (kv.first == "http") ports.http = value;
  }
  if (ports.grpc <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": no grpc port"));
  return ports;
}

}  // namespace pdserve
