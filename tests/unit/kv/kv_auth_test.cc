// KV data plane authentication: the HMAC primitive against RFC 4231, the
// challenge-response rules, and the TCP transport with matching, wrong and
// missing secrets (nothing may be written into the receiver's blocks
// unless both sides hold the same secret).
#include "common/kv/kv_auth.h"

#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;
using ::pdserve::testing::ExpectGuardBlocksUntouched;
using ::pdserve::testing::MakeCache;
using ::pdserve::testing::MakeRandomCache;
using ::pdserve::testing::SameBlock;
using ::pdserve::testing::ScopedTempDir;

std::string Hex(const KvMac& mac) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

TEST(KvAuthKeyTest, HmacSha256MatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(Hex(KvAuthKey::HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(KvAuthKeyTest, ProofsBindRoleNoncesAndSecret) {
  const KvAuthKey key = *KvAuthKey::FromSecret("0123456789abcdef-secret");
  const KvAuthKey same = *KvAuthKey::FromSecret("0123456789abcdef-secret\n");  // newline dropped
  const KvAuthKey other = *KvAuthKey::FromSecret("0123456789abcdef-other!");
  const KvNonce s = NewKvNonce(), r = NewKvNonce();
  EXPECT_NE(s, r);
  const KvMac mac = key.Prove(KvAuthRole::kSender, s, r);
  EXPECT_TRUE(same.Verify(KvAuthRole::kSender, s, r, mac.data()));
  EXPECT_FALSE(other.Verify(KvAuthRole::kSender, s, r, mac.data()));
  // A receiver's answer is not a sender's proof (no reflection), and the
  // nonces of another handshake do not fit.
  EXPECT_FALSE(key.Verify(KvAuthRole::kReceiver, s, r, mac.data()));
  EXPECT_FALSE(key.Verify(KvAuthRole::kSender, r, s, mac.data()));
  EXPECT_FALSE(key.Verify(KvAuthRole::kSender, s, NewKvNonce(), mac.data()));
}

TEST(KvAuthKeyTest, ShortOrMissingSecretsAreRefused) {
  EXPECT_EQ(KvAuthKey::FromSecret("short\n").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvAuthKey::Load("/nonexistent/secret").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::shared_ptr<const KvAuthKey>> none = LoadKvAuthKey("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  const ScopedTempDir dir("kv-auth-test");
  const std::string path = dir.File("kv_secret");
  std::ofstream(path) << "a-long-enough-shared-secret\n";
  absl::StatusOr<std::shared_ptr<const KvAuthKey>> loaded = LoadKvAuthKey(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_NE(*loaded, nullptr);
}

constexpr uint8_t kGuard = 0x5a;
constexpr int kLayers = 3;

std::shared_ptr<const KvAuthKey> Key(const std::string& secret) {
  return std::make_shared<const KvAuthKey>(*KvAuthKey::FromSecret(secret));
}

// One transfer of two blocks from a sender with `sender_key` to a receiver
// with `receiver_key`; returns the receiver's verdict.
absl::Status Transfer(std::shared_ptr<const KvAuthKey> sender_key,
                      std::shared_ptr<const KvAuthKey> receiver_key) {
  std::unique_ptr<KvCache> src = MakeRandomCache(8, 99);
  std::unique_ptr<KvCache> dst = MakeCache(8, kGuard);
  FramedKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  ro.auth = std::move(receiver_key);
  std::unique_ptr<FramedKvReceiver> receiver = FramedKvReceiver::Create(dst.get(), ro).value();
  FramedKvSenderOptions so;
  so.auth = std::move(sender_key);
  so.connect_timeout = absl::Seconds(3);
  so.idle_timeout = absl::Seconds(3);
  std::unique_ptr<FramedKvSender> sender = FramedKvSender::Create(so).value();
  DoneProbe probe;
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  EXPECT_TRUE(receiver->Expect(1, 1, {4, 5}, kLayers, deadline, probe.Callback()).ok());
  const KvTransferTarget target{absl::StrCat("127.0.0.1:", receiver->port()), 1, 1, deadline};
  absl::Status sent = absl::OkStatus();
  for (int l = 0; l < kLayers && sent.ok(); ++l) sent = sender->SendLayer(target, l, {0, 1}, *src, {2, 3});
  if (sent.ok()) sent = sender->Commit(target, KvCommit{kLayers, 0, 7});
  if (!sent.ok()) sender->Abort(target, "test: send failed");
  absl::StatusOr<KvCommit> done = probe.Wait();
  if (done.ok()) {
    EXPECT_TRUE(sent.ok()) << sent;
    for (int l = 0; l < kLayers; ++l) {
      EXPECT_TRUE(SameBlock(*src, 2, *dst, 4, l));
      EXPECT_TRUE(SameBlock(*src, 3, *dst, 5, l));
    }
    return absl::OkStatus();
  }
  // Refused: not one byte of the blocks was written.
  EXPECT_FALSE(sent.ok());
  ExpectGuardBlocksUntouched(*dst, {}, kGuard);
  receiver->Cancel(1);
  return done.status();
}

TEST(KvAuthTransportTest, SameSecretTransfers) {
  EXPECT_TRUE(Transfer(Key("shared-secret-0123456789"), Key("shared-secret-0123456789")).ok());
}

TEST(KvAuthTransportTest, WrongSecretIsRefused) {
  EXPECT_FALSE(Transfer(Key("shared-secret-0123456789"), Key("another-secret-987654321")).ok());
}

TEST(KvAuthTransportTest, SenderWithoutSecretIsRefused) {
  EXPECT_FALSE(Transfer(nullptr, Key("shared-secret-0123456789")).ok());
}

TEST(KvAuthTransportTest, ReceiverWithoutSecretIsRefused) {
  EXPECT_FALSE(Transfer(Key("shared-secret-0123456789"), nullptr).ok());
}

}  // namespace
}  // namespace pdserve
