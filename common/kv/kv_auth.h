// KvAuthKey: peer authentication of the TCP KV data plane by a shared
// secret (docs/protocol/kv-wire.md, "Authentication"). Both ends of a
// connection prove they hold the secret before any frame is sent, by a
// challenge-response over fresh nonces, so a process without the secret
// can neither write into a decode worker's KV blocks nor receive a prompt's
// KV. The secret never crosses the wire.
//
//   sender   -> receiver  kKvAuthMagic (8) | sender nonce (16)
//   receiver -> sender    receiver nonce (16) | HMAC(key, "pdserve-kv decode" | sn | rn)
//   sender   -> receiver  HMAC(key, "pdserve-kv prefill" | sn | rn)
//
// Distinct labels stop one side's answer from being replayed as the other's.
// HMAC-SHA256 (OpenSSL); MACs are compared in constant time. Not
// encryption: the KV bytes still travel in clear (keep the KV network
// private, or terminate it in a mesh).
//
// Thread-safety: immutable; safe to share.
#ifndef PDSERVE_COMMON_KV_KV_AUTH_H_
#define PDSERVE_COMMON_KV_KV_AUTH_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pdserve {

inline constexpr absl::string_view kKvAuthMagic = "PDKVAUTH";
inline constexpr size_t kKvNonceBytes = 16;
inline constexpr size_t kKvMacBytes = 32;
inline constexpr size_t kKvHelloBytes = 8 + kKvNonceBytes;
inline constexpr size_t kKvChallengeBytes = kKvNonceBytes + kKvMacBytes;

using KvNonce = std::array<uint8_t, kKvNonceBytes>;
using KvMac = std::array<uint8_t, kKvMacBytes>;

enum class KvAuthRole { kReceiver, kSender };

class KvAuthKey {
 public:
  // The file's bytes, minus trailing whitespace, are the secret; at least 16
  // bytes (e.g. `head -c 32 /dev/urandom | base64`).
  static absl::StatusOr<KvAuthKey> Load(const std::string& path);
  static absl::StatusOr<KvAuthKey> FromSecret(std::string secret);

  // What `role` sends to prove itself for this pair of nonces.
  KvMac Prove(KvAuthRole role, const KvNonce& sender, const KvNonce& receiver) const;
  // Whether `mac` is what `role` should have sent (constant time).
  bool Verify(KvAuthRole role, const KvNonce& sender, const KvNonce& receiver,
              const uint8_t* mac) const;

  // Raw HMAC-SHA256, exposed for the RFC 4231 known-answer test.
  static KvMac HmacSha256(absl::string_view key, absl::string_view message);

 private:
  explicit KvAuthKey(std::string secret) : secret_(std::move(secret)) {}

  std::string secret_;
};

// The key in `path`, or null for "" (no authentication): what a worker's
// --kv_secret_file gives its transport.
absl::StatusOr<std::shared_ptr<const KvAuthKey>> LoadKvAuthKey(const std::string& path);

// A fresh random nonce (OpenSSL's CSPRNG).
KvNonce NewKvNonce();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_AUTH_H_
