// The encrypted KV plane (--kv_tls, common/kv/kv_stream.h): a transfer
// over mutual TLS lands byte for byte; a receiver that wants TLS refuses a
// plain sender and a sender whose certificate another CA signed, and keeps
// serving; a TLS sender refuses a plain receiver. Certificates are made by
// the openssl CLI at test time (skipped without it).
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "common/kv/kv_stream.h"
#include "common/tls/reloading_tls_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;
using ::pdserve::testing::MakeCache;
using ::pdserve::testing::MakeRandomCache;
using ::pdserve::testing::SameBlock;
using ::testing::HasSubstr;

constexpr int kLayers = 2;

// Two CAs; a receiver and a sender certificate from `ca`, a rogue one from
// `other`.
bool MakeCertificates(const std::string& dir) {
  const std::string script = absl::StrCat(
      "(set -e; cd '", dir, "';",
      "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';",
      "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj /CN=kv-ca;",
      "openssl req -x509 $K -keyout other.key -out other.pem -days 2 -subj /CN=other-ca;",
      "for n in receiver sender; do openssl req $K -keyout $n.key -out $n.csr -subj /CN=$n;",
      "openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-out $n.pem; done;",
      "openssl req $K -keyout rogue.key -out rogue.csr -subj /CN=rogue;",
      "openssl x509 -req -in rogue.csr -CA other.pem -CAkey other.key -CAcreateserial -days 2 "
      "-out rogue.pem) >/dev/null 2>&1");
  return std::system(script.c_str()) == 0;
}

class KvTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TestTempDir("kv-tls-test");
    if (std::system("command -v openssl >/dev/null") != 0 || !MakeCertificates(dir_)) {
      GTEST_SKIP() << "openssl CLI not available to make test certificates";
    }
  }

  std::shared_ptr<ReloadingTlsContext> Tls(const std::string& name, const std::string& ca = "ca") {
    auto tls = ReloadingTlsContext::Load({absl::StrCat(dir_, "/", name, ".pem"),
                                          absl::StrCat(dir_, "/", name, ".key"),
                                          absl::StrCat(dir_, "/", ca, ".pem")});
    EXPECT_TRUE(tls.ok()) << tls.status();
    return tls.ok() ? *tls : nullptr;
  }

  void StartReceiver(std::shared_ptr<ReloadingTlsContext> tls,
                     absl::Duration idle_timeout = absl::Seconds(10)) {
    FramedKvReceiverOptions o;
    o.listen_address = "127.0.0.1:0";
    o.idle_timeout = idle_timeout;
    o.tls = std::move(tls);
    auto receiver = FramedKvReceiver::Create(dst_.get(), o);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(*receiver);
  }

  std::unique_ptr<FramedKvSender> Sender(std::shared_ptr<ReloadingTlsContext> tls) {
    FramedKvSenderOptions o;
    o.tls = std::move(tls);
    o.connect_timeout = absl::Seconds(2);
    auto sender = FramedKvSender::Create(o);
    EXPECT_TRUE(sender.ok()) << sender.status();
    return sender.ok() ? std::move(*sender) : nullptr;
  }

  // One transfer of `src` into `dst` through `sender`: what the sender's
  // commit says, and (when it succeeded) whether the receiver got it.
  absl::Status Transfer(FramedKvSender& sender, uint64_t id, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst) {
    DoneProbe probe;
    const absl::Time deadline = absl::Now() + absl::Seconds(3);
    EXPECT_TRUE(receiver_->Expect(id, 1, dst, kLayers, deadline, probe.Callback()).ok());
    const KvTransferTarget target{absl::StrCat("127.0.0.1:", receiver_->port()), id, 1, deadline};
    std::vector<int32_t> logical(src.size());
    for (size_t i = 0; i < src.size(); ++i) logical[i] = static_cast<int32_t>(i);
    absl::Status st;
    for (int l = 0; l < kLayers && st.ok(); ++l) st = sender.SendLayer(target, l, logical, *src_, src);
    if (st.ok()) st = sender.Commit(target, KvCommit{kLayers, 0, 7});
    if (!st.ok()) {
      sender.Abort(target, "test: failed");
      receiver_->Cancel(id);
      (void)probe.Wait();
      return st;
    }
    absl::StatusOr<KvCommit> done = probe.Wait();
    return done.status();
  }

  std::string dir_;
  std::unique_ptr<KvCache> src_ = MakeRandomCache(16, 99);
  std::unique_ptr<KvCache> dst_ = MakeCache(16, 0x5a);
  std::unique_ptr<FramedKvReceiver> receiver_;
};

TEST_F(KvTlsTest, AnEncryptedTransferLandsByteForByte) {
  StartReceiver(Tls("receiver"));
  auto sender = Sender(Tls("sender"));
  const std::vector<int32_t> src = {3, 9, 1}, dst = {0, 4, 12};
  ASSERT_TRUE(Transfer(*sender, 1, src, dst).ok());
  for (int l = 0; l < kLayers; ++l) {
    for (size_t i = 0; i < src.size(); ++i) EXPECT_TRUE(SameBlock(*src_, src[i], *dst_, dst[i], l));
  }
  // The connection stays up for the next transfer.
  EXPECT_TRUE(Transfer(*sender, 2, {5}, {6}).ok());
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

TEST_F(KvTlsTest, ATlsReceiverRefusesPlainAndForeignSendersAndKeepsServing) {
  StartReceiver(Tls("receiver"));
  auto plain = Sender(nullptr);
  const absl::Status refused_plain = Transfer(*plain, 1, {1}, {1});
  EXPECT_FALSE(refused_plain.ok());
  EXPECT_EQ(refused_plain.code(), absl::StatusCode::kUnavailable) << refused_plain;
  // A certificate from another CA, though it trusts the receiver's.
  auto rogue = Sender(Tls("rogue", "ca"));
  const absl::Status refused_rogue = Transfer(*rogue, 2, {2}, {2});
  EXPECT_FALSE(refused_rogue.ok()) << "a sender certified by another CA got through";
  // Neither left anything behind, and a trusted sender is served.
  EXPECT_EQ(receiver_->num_pending(), 0u);
  auto good = Sender(Tls("sender"));
  EXPECT_TRUE(Transfer(*good, 3, {4, 5}, {7, 8}).ok());
}

TEST_F(KvTlsTest, ATlsSenderRefusesAPlainOrUntrustedReceiver) {
  StartReceiver(nullptr);
  auto sender = Sender(Tls("sender"));
  const absl::Status plain = Transfer(*sender, 1, {1}, {1});
  EXPECT_EQ(plain.code(), absl::StatusCode::kUnavailable) << plain;
  EXPECT_THAT(std::string(plain.message()), HasSubstr("TLS handshake"));
  // A receiver whose certificate the sender's CA did not sign.
  StartReceiver(Tls("rogue", "ca"));
  const absl::Status untrusted = Transfer(*sender, 2, {2}, {2});
  EXPECT_EQ(untrusted.code(), absl::StatusCode::kUnavailable) << untrusted;
  EXPECT_THAT(std::string(untrusted.message()), HasSubstr("TLS handshake"));
}

// Handshakes are bounded like everything else on the KV plane: a peer that
// takes the TCP connection and then says nothing is cut, on either side.
TEST_F(KvTlsTest, AStalledHandshakeIsCutOnBothSides) {
  namespace asio = boost::asio;
  asio::io_context io;
  // A "receiver" whose kernel completes the TCP handshake (backlog) but
  // which never answers the ClientHello.
  asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  auto sender = Sender(Tls("sender"));  // connect timeout 2 s
  const KvTransferTarget target{absl::StrCat("127.0.0.1:", silent.local_endpoint().port()), 1, 1,
                                absl::Now() + absl::Seconds(10)};
  const absl::Time start = absl::Now();
  absl::Status st = sender->SendLayer(target, 0, {0}, *src_, {1});
  if (st.ok()) st = sender->Commit(target, KvCommit{1, 0, 7});
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("connect timed out"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));  // the 2 s timeout, not the deadline

  // A client that connects to a TLS receiver and never sends its hello.
  StartReceiver(Tls("receiver"), /*idle_timeout=*/absl::Milliseconds(300));
  asio::ip::tcp::socket quiet(io);
  quiet.connect({asio::ip::make_address("127.0.0.1"), receiver_->port()});
  const timeval wait{5, 0};  // a receiver that never cuts it fails the test, not hangs it
  setsockopt(quiet.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  char byte;
  boost::system::error_code ec;
  quiet.read_some(asio::buffer(&byte, 1), ec);  // returns once the receiver closes
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  auto good = Sender(Tls("sender"));
  EXPECT_TRUE(Transfer(*good, 2, {4}, {7}).ok());
}

// A sender's Reset() may cut its TLS handshake between a read's completion
// and the handshake taking that read in: the handshake then takes one more
// step on the session Reset() replaced. Cut at each step in turn (under
// ASan a session freed before its operations is a heap-use-after-free).
TEST_F(KvTlsTest, AHandshakeCutAtAnyStepFinishesOnItsOwnSession) {
  namespace asio = boost::asio;
  const std::shared_ptr<ReloadingTlsContext> tls = Tls("sender");
  for (int steps = 0; steps < 6; ++steps) {
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    KvStream stream(io.get_executor(), tls);
    stream.socket().connect(acceptor.local_endpoint());
    asio::ip::tcp::socket peer = acceptor.accept();
    // The header of a TLS record whose body never comes: the handshake
    // reads it and asks for more.
    const unsigned char header[] = {0x16, 0x03, 0x03, 0x00, 0x40};
    asio::write(peer, asio::buffer(header));
    int completions = 0;
    boost::system::error_code result;
    stream.async_handshake(/*client=*/true, [&](const boost::system::error_code& ec) {
      ++completions;
      result = ec;
    });
    for (int i = 0; i < steps && io.poll_one() > 0; ++i) {
    }
    stream.Reset();
    io.restart();
    io.run();
    EXPECT_EQ(completions, 1) << "cut after " << steps << " steps";
    EXPECT_TRUE(result.failed()) << "cut after " << steps << " steps";
  }
}

}  // namespace
}  // namespace pdserve
