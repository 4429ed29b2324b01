// MetricsHttpServer: the /metrics endpoint for Prometheus scrapes, served
// through HttpServer (common/http). GET (or HEAD) /metrics answers 200 with
// the registry's text exposition. /healthz answers 200 while the process
// serves HTTP at all, /readyz 200 when it is ready for work and 503 when not
// (starting, draining): the same answer as its gRPC health check, for
// Kubernetes probes, which cannot speak gRPC over TLS. Any other path 404,
// any other method 405;
// HttpServer answers a malformed request 400 and a header block over the
// size limit 431. One request per connection (Connection: close): a scrape
// every interval needs no persistent connection, and none stays open
// between scrapes.
//
// Runs on its own I/O thread so a slow scraper never delays gRPC or the KV
// transport; a connection that does not send its request within the read
// timeout is closed, so idle sockets cannot pile up.
//
// Thread-safety: Start() and the destructor from one thread. The registry
// must outlive the server.
#ifndef PDSERVE_COMMON_METRICS_METRICS_HTTP_SERVER_H_
#define PDSERVE_COMMON_METRICS_METRICS_HTTP_SERVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/http/http_request.h"
#include "common/metrics/metrics_registry.h"

namespace pdserve {

class HttpServer;

struct MetricsHttpServerOptions {
  // "host:port"; port 0 picks a free port (tests).
  std::string listen_address = "0.0.0.0:9090";
  absl::Duration read_timeout = absl::Seconds(5);
  // Request line plus headers; a scrape request is a few hundred bytes.
  size_t max_request_bytes = 8192;
  // What /readyz reports; unset = always ready. Called on the server's I/O
  // thread: it must be cheap and thread-safe.
  std::function<bool()> ready;
};

class MetricsHttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpServerOptions& options, const MetricsRegistry* registry);
  // Stops accepting and closes every connection.
  ~MetricsHttpServer();

  int port() const;

 private:
  explicit MetricsHttpServer(std::unique_ptr<HttpServer> server);
  std::unique_ptr<HttpServer> server_;
};

// The --metrics_port convention of every pdserve process: 0 = no metrics
// server, kAnyMetricsPort = a port the kernel picks (reported through
// --port_file; local clusters and tests), else that port.
inline constexpr int kAnyMetricsPort = -1;
absl::Status ValidateMetricsPort(int metrics_port);
// "0.0.0.0:<port>" for a metrics_port other than 0.
std::string MetricsListenAddress(int metrics_port);

// What the server answers a well-formed request; exposed for tests.
struct MetricsHttpReply {
  int status = 200;
  std::string content_type;
  std::string body;
  HttpHeaderList headers;
};
// HEAD is answered as GET; HttpServer then sends the headers only.
MetricsHttpReply MetricsHttpAnswer(absl::string_view method, absl::string_view target,
                                   const MetricsRegistry& registry,
                                   const std::function<bool()>& ready = nullptr);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_METRICS_METRICS_HTTP_SERVER_H_
