// Worker targets (static host:port and dns:///host:port), their validation
// in RouterConfig, and the system resolver the router uses for DNS ones.
#include "router/config/worker_target.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/config/router_config.h"
#include "router/pool/dns_resolver.h"

namespace pdserve::router {
namespace {

using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;

WorkerTarget MustParse(const std::string& text) {
  absl::StatusOr<WorkerTarget> t = ParseWorkerTarget(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.status();
  return t.ok() ? *t : WorkerTarget{};
}

TEST(WorkerTargetTest, StaticHostPort) {
  const WorkerTarget t = MustParse("decode-0.example:50071");
  EXPECT_FALSE(t.dns);
  EXPECT_EQ(t.host, "decode-0.example");
  EXPECT_EQ(t.port, 50071);
  EXPECT_EQ(t.Canonical(), "decode-0.example:50071");
}

TEST(WorkerTargetTest, StaticIpv6KeepsItsBrackets) {
  const WorkerTarget t = MustParse("[fd00::1]:50071");
  EXPECT_FALSE(t.dns);
  EXPECT_EQ(t.host, "fd00::1");
  EXPECT_EQ(t.Canonical(), "[fd00::1]:50071");
}

TEST(WorkerTargetTest, DnsSpellingsShareOneCanonicalForm) {
  for (const char* text : {"dns:///pdserve-decode.ns.svc.cluster.local:50071",
                           "dns:pdserve-decode.ns.svc.cluster.local:50071"}) {
    const WorkerTarget t = MustParse(text);
    EXPECT_TRUE(t.dns) << text;
    EXPECT_EQ(t.host, "pdserve-decode.ns.svc.cluster.local") << text;
    EXPECT_EQ(t.port, 50071) << text;
    EXPECT_EQ(t.Canonical(), "dns:///pdserve-decode.ns.svc.cluster.local:50071") << text;
  }
}

TEST(WorkerTargetTest, RejectsWhatItCannotServe) {
  for (const char* text :
       {"", "decode", "decode:", "decode:0", ":50071", "decode:65536", "fd00::1:50071",
        "dns:///decode", "dns:///:50071", "dns:///decode:0", "dns://8.8.8.8/decode:50071",
        "dns://decode:50071", "ipv4:10.0.0.1:50071x", "unix:///tmp/sock", "http://decode:50071"}) {
    EXPECT_FALSE(ParseWorkerTarget(text).ok()) << text;
  }
}

TEST(WorkerTargetTest, AuthorityErrorSaysWhatToWrite) {
  absl::StatusOr<WorkerTarget> t = ParseWorkerTarget("dns://8.8.8.8/decode:50071");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("dns:///host:port"));
}

RouterConfig ConfigWith(std::vector<std::string> decode, std::vector<std::string> prefill) {
  RouterConfig c;
  c.model_path = "model.gguf";
  c.decode_addresses = std::move(decode);
  c.prefill_addresses = std::move(prefill);
  return c;
}

TEST(RouterConfigTargetsTest, AcceptsStaticAndDnsTargets) {
  EXPECT_TRUE(
      ConfigWith({"dns:///decode.ns.svc:50071", "10.0.0.7:50071"}, {"dns:prefill.ns.svc:50061"})
          .Validate()
          .ok());
}

TEST(RouterConfigTargetsTest, NamesTheFlagOfABadTarget) {
  absl::Status s = ConfigWith({"decode:1"}, {"dns://x/prefill:1"}).Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--prefill"));
}

TEST(RouterConfigTargetsTest, TwoSpellingsOfOneDnsTargetAreADuplicate) {
  absl::Status s = ConfigWith({"dns:///decode:1", "dns:decode:1"}, {}).Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("twice"));
}

TEST(RouterConfigTargetsTest, DnsRefreshMustBePositive) {
  RouterConfig c = ConfigWith({"dns:///decode:1"}, {});
  c.dns_refresh_ms = 0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("dns_refresh_ms"));
}

TEST(ResolveWithGetAddrInfoTest, LocalhostIsLoopback) {
  absl::StatusOr<std::vector<std::string>> ips = ResolveWithGetAddrInfo("localhost");
  ASSERT_TRUE(ips.ok()) << ips.status();
  EXPECT_THAT(*ips, AnyOf(Contains("127.0.0.1"), Contains("::1")));
}

TEST(ResolveWithGetAddrInfoTest, IpLiteralResolvesToItself) {
  absl::StatusOr<std::vector<std::string>> ips = ResolveWithGetAddrInfo("::1");
  ASSERT_TRUE(ips.ok()) << ips.status();
  EXPECT_EQ(*ips, std::vector<std::string>{"::1"});
}

TEST(ResolveWithGetAddrInfoTest, UnknownNameIsUnavailable) {
  // .invalid never resolves (RFC 2606).
  absl::StatusOr<std::vector<std::string>> ips = ResolveWithGetAddrInfo("no-such-host.invalid");
  ASSERT_FALSE(ips.ok());
  EXPECT_EQ(ips.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(ips.status().message(), HasSubstr("no-such-host.invalid"));
}

}  // namespace
}  // namespace pdserve::router
