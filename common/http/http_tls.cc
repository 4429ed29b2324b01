#include "common/http/http_tls.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace pdserve {
namespace {

namespace ssl = boost::asio::ssl;

absl::Status Failed(const std::string& what, const boost::system::error_code& ec) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", ec.message()));
}

}  // namespace

absl::StatusOr<std::shared_ptr<ssl::context>> MakeHttpTlsContext(
    const std::string& cert_path, const std::string& key_path,
    const std::string& client_ca_path) {
  if (cert_path.empty() || key_path.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and its private key");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_path, ec);
  if (ec) return Failed(absl::StrCat("TLS certificate ", cert_path), ec);
  ctx->use_private_key_file(key_path, ssl::context::pem, ec);
  if (ec) return Failed(absl::StrCat("TLS private key ", key_path), ec);
  if (!client_ca_path.empty()) {
    ctx->load_verify_file(client_ca_path, ec);
    if (ec) return Failed(absl::StrCat("TLS client CA ", client_ca_path), ec);
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return Failed("TLS verify mode", ec);
  }
  return ctx;
}

}  // namespace pdserve
