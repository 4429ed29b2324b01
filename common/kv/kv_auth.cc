#include "common/kv/kv_auth.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pdserve {
namespace {

constexpr size_t kMinSecretBytes = 16;

absl::string_view Label(KvAuthRole role) {
  return role == KvAuthRole::kReceiver ? "pdserve-kv decode" : "pdserve-kv prefill";
}

}  // namespace

absl::StatusOr<KvAuthKey> KvAuthKey::Load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot read KV secret file ", path));
  std::stringstream s;
  s << f.rdbuf();
  absl::StatusOr<KvAuthKey> key = FromSecret(s.str());
  if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", key.status().message()));
  return key;
}

absl::StatusOr<KvAuthKey> KvAuthKey::FromSecret(std::string secret) {
  // Files written by editors and `echo` end with a newline; it is not part
  // of the secret on either side.
  secret.erase(absl::StripTrailingAsciiWhitespace(secret).size());
  if (secret.size() < kMinSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV secret too short (", secret.size(), " bytes; want >= ", kMinSecretBytes,
                     ")"));
  }
  return KvAuthKey(std::move(secret));
}

KvMac KvAuthKey::HmacSha256(absl::string_view key, absl::string_view message) {
  KvMac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &len);
  return out;
}

KvMac KvAuthKey::Prove(KvAuthRole role, const KvNonce& sender, const KvNonce& receiver) const {
  std::string message(Label(role));
  message.append(reinterpret_cast<const char*>(sender.data()), sender.size());
  message.append(reinterpret_cast<const char*>(receiver.data()), receiver.size());
  return HmacSha256(secret_, message);
}

bool KvAuthKey::Verify(KvAuthRole role, const KvNonce& sender, const KvNonce& receiver,
                       const uint8_t* mac) const {
  const KvMac want = Prove(role, sender, receiver);
  return CRYPTO_memcmp(want.data(), mac, want.size()) == 0;
}

absl::StatusOr<std::shared_ptr<const KvAuthKey>> LoadKvAuthKey(const std::string& path) {
  if (path.empty()) return std::shared_ptr<const KvAuthKey>();
  absl::StatusOr<KvAuthKey> key = KvAuthKey::Load(path);
  if (!key.ok()) return key.status();
  return std::make_shared<const KvAuthKey>(std::move(*key));
}

KvNonce NewKvNonce() {
  KvNonce n{};
  // RAND_bytes fails only when the CSPRNG cannot be seeded, which on Linux
  // (getrandom) does not happen after boot; a zero nonce would still be
  // unpredictable to nobody, so treat it as fatal.
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) std::abort();
  return n;
}

}  // namespace pdserve
