#include "common/metrics/metrics_http_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/http/http_server.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

constexpr char kTextPlain[] = "text/plain; charset=utf-8";

MetricsHttpReply TextReply(int status, absl::string_view reason, HttpHeaderList headers = {}) {
  return {status, kTextPlain, absl::StrCat(status, " ", reason, "\n"), std::move(headers)};
}

}  // namespace

absl::Status ValidateMetricsPort(int metrics_port) {
  if (metrics_port < kAnyMetricsPort || metrics_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", metrics_port, " must be -1 (any free port), 0 (off) or a port"));
  }
  return absl::OkStatus();
}

std::string MetricsListenAddress(int metrics_port) {
  return absl::StrCat("0.0.0.0:", metrics_port == kAnyMetricsPort ? 0 : metrics_port);
}

MetricsHttpReply MetricsHttpAnswer(absl::string_view method, absl::string_view target,
                                   const MetricsRegistry& registry,
                                   const std::function<bool()>& ready) {
  // Beast accepts any request-target form; a scrape sends origin-form only.
  if (target.empty() || target[0] != '/') return TextReply(400, "Bad Request");
  const absl::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics" && path != "/healthz" && path != "/readyz") {
    return TextReply(404, "Not Found");
  }
  if (method != "GET" && method != "HEAD") {
    return TextReply(405, "Method Not Allowed", {{"Allow", "GET, HEAD"}});
  }
  if (path == "/healthz") return TextReply(200, "OK");
  if (path == "/readyz") {
    return ready == nullptr || ready() ? TextReply(200, "OK")
                                       : TextReply(503, "Service Unavailable");
  }
  return {200, "text/plain; version=0.0.4; charset=utf-8", registry.Expose(), {}};
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<HttpServer> server)
    : server_(std::move(server)) {}
MetricsHttpServer::~MetricsHttpServer() = default;

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpServerOptions& options, const MetricsRegistry* registry) {
  HttpServerOptions o;
  o.listen_address = options.listen_address;
  o.read_timeout = options.read_timeout;
  o.max_header_bytes = options.max_request_bytes;
  // A scrape has no body; this only bounds what a stray POST can make us read.
  o.max_body_bytes = options.max_request_bytes;
  o.thread_name = "metrics-http";
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      o, [registry, ready = options.ready](HttpRequest request,
                                           std::shared_ptr<HttpResponder> responder) {
        MetricsHttpReply reply =
            MetricsHttpAnswer(request.method, request.target, *registry, ready);
        reply.headers.emplace_back("Connection", "close");
        responder->Respond(reply.status, std::move(reply.content_type), std::move(reply.body),
                           std::move(reply.headers));
      });
  if (!server.ok()) return server.status();
  LOG(INFO) << "metrics on http://"
            << options.listen_address.substr(0, options.listen_address.rfind(':')) << ":"
            << (*server)->port() << "/metrics";
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(*server)));
}

int MetricsHttpServer::port() const { return server_->port(); }

}  // namespace pdserve
