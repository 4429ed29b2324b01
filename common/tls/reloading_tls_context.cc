#include "common/tls/reloading_tls_context.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

namespace ssl = boost::asio::ssl;

absl::Status Failed(const std::string& what, const boost::system::error_code& ec) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", ec.message()));
}

absl::StatusOr<std::shared_ptr<ssl::context>> MakeContext(const TlsContextFiles& files) {
  // Either role: the KV plane's senders make client handshakes with it
  // (common/kv/kv_stream.h).
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(files.cert, ec);
  if (ec) return Failed(absl::StrCat("TLS certificate ", files.cert), ec);
  ctx->use_private_key_file(files.key, ssl::context::pem, ec);
  if (ec) return Failed(absl::StrCat("TLS private key ", files.key), ec);
  if (!files.client_ca.empty()) {
    ctx->load_verify_file(files.client_ca, ec);
    if (ec) return Failed(absl::StrCat("TLS client CA ", files.client_ca), ec);
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return Failed("TLS verify mode", ec);
  }
  return ctx;
}

// The bytes of every file, in order; "" when one cannot be read (then
// nothing is reloaded: the kubelet's swap is atomic, a reader never sees a
// missing file for long).
std::string Contents(const TlsContextFiles& files) {
  std::string out;
  for (const std::string* path : {&files.cert, &files.key, &files.client_ca}) {
    if (path->empty()) continue;
    std::ifstream f(*path, std::ios::binary);
    if (!f) return "";
    std::ostringstream s;
    s << f.rdbuf();
    absl::StrAppend(&out, s.str().size(), ":", s.str());
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ReloadingTlsContext>> ReloadingTlsContext::Load(
    const TlsContextFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and its private key");
  }
  std::string contents = Contents(files);
  absl::StatusOr<std::shared_ptr<ssl::context>> context = MakeContext(files);
  if (!context.ok()) return context.status();
  return std::shared_ptr<ReloadingTlsContext>(
      new ReloadingTlsContext(files, std::move(*context), std::move(contents)));
}

ReloadingTlsContext::ReloadingTlsContext(TlsContextFiles files,
                                         std::shared_ptr<ssl::context> context,
                                         std::string contents)
    : files_(std::move(files)),
      context_(std::move(context)),
      loaded_(std::move(contents)),
      next_check_(absl::Now() + files_.reload_interval) {}

std::shared_ptr<ssl::context> ReloadingTlsContext::Current() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now < next_check_) return context_;
  next_check_ = now + files_.reload_interval;
  std::string contents = Contents(files_);
  if (contents.empty() || contents == loaded_ || contents == refused_) return context_;
  absl::StatusOr<std::shared_ptr<ssl::context>> fresh = MakeContext(files_);
  if (!fresh.ok()) {
    LOG(WARNING) << "The changed TLS files do not load, keeping the previous ones: "
                 << fresh.status();
    refused_ = std::move(contents);
    return context_;
  }
  LOG(INFO) << "TLS files changed, new connections use the new certificate " << files_.cert;
  context_ = std::move(*fresh);
  loaded_ = std::move(contents);
  refused_.clear();
  return context_;
}

}  // namespace pdserve
