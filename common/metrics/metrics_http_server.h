// MetricsHttpServer: a minimal HTTP/1.1 server for Prometheus scrapes.
// GET /metrics answers 200 with the registry's text exposition; any other
// path 404, any other method 405, a malformed request 400, a header block
// over the size limit 431. One request per connection (Connection: close):
// a scraper reconnects every interval anyway, and it keeps the server tiny.
//
// Runs on its own IoThread so a slow scraper never delays gRPC or the KV
// transport; a connection that does not send its request within the read
// timeout is closed, so idle sockets cannot pile up.
//
// Thread-safety: Start() and the destructor from one thread. The registry
// must outlive the server.
#ifndef PDSERVE_COMMON_METRICS_METRICS_HTTP_SERVER_H_
#define PDSERVE_COMMON_METRICS_METRICS_HTTP_SERVER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_registry.h"

namespace pdserve {

struct MetricsHttpServerOptions {
  // "host:port"; port 0 picks a free port (tests).
  std::string listen_address = "0.0.0.0:9090";
  absl::Duration read_timeout = absl::Seconds(5);
  // Request line plus headers; a scrape request is a few hundred bytes.
  size_t max_request_bytes = 8192;
};

class MetricsHttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpServerOptions& options, const MetricsRegistry* registry);
  // Stops accepting and closes every connection.
  ~MetricsHttpServer();

  int port() const;

  class Impl;

 private:
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The --metrics_port convention of every pdserve process: 0 = no metrics
// server, kAnyMetricsPort = a port the kernel picks (reported through
// --port_file; local clusters and tests), else that port.
inline constexpr int kAnyMetricsPort = -1;
absl::Status ValidateMetricsPort(int metrics_port);
// "0.0.0.0:<port>" for a metrics_port other than 0.
std::string MetricsListenAddress(int metrics_port);

// The response to one request head ("GET /metrics HTTP/1.1\r\n..."),
// exposed for tests.
std::string MetricsHttpResponse(absl::string_view request_head, const MetricsRegistry& registry);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_METRICS_METRICS_HTTP_SERVER_H_
