// Certificates for TLS tests, made by the openssl CLI at test time: a CA
// (ca.pem, ca.key), a server certificate for 127.0.0.1 and localhost
// (server.pem, server.key) and a client certificate (client.pem,
// client.key), both signed by the CA. Tests skip when openssl is missing.
#ifndef PDSERVE_TESTS_TESTING_TEST_CERTIFICATES_H_
#define PDSERVE_TESTS_TESTING_TEST_CERTIFICATES_H_

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace pdserve::testing {

// False when openssl is not installed or fails.
inline bool MakeTestCertificates(const std::string& dir) {
  if (std::system("command -v openssl >/dev/null") != 0) return false;
  const std::string script = absl::StrCat(
      "(set -e; cd '", dir, "';",
      "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';",
      "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj /CN=pdserve-test-ca;",
      "openssl req $K -keyout server.key -out server.csr -subj /CN=127.0.0.1;",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > san.ext;",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile san.ext -out server.pem;",
      "openssl req $K -keyout client.key -out client.csr -subj /CN=pdserve-router;",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-out client.pem) >/dev/null 2>&1");
  return std::system(script.c_str()) == 0;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_TEST_CERTIFICATES_H_
