#include "common/kv/kv_path.h"

#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(KvPathTest, FlagSpellings) {
  EXPECT_EQ(*ParseKvTransportFlag("auto"), KvTransportFlag::kAuto);
  EXPECT_EQ(*ParseKvTransportFlag("tcp"), KvTransportFlag::kTcp);
  EXPECT_EQ(*ParseKvTransportFlag("cuda_ipc"), KvTransportFlag::kCudaIpc);
  EXPECT_EQ(*ParseKvTransportFlag("nccl"), KvTransportFlag::kNccl);
  for (const char* bad : {"", "TCP", "ipc", "nccl ", "cuda-ipc"}) {
    EXPECT_EQ(ParseKvTransportFlag(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(KvPathTest, ChoiceTable) {
  const std::vector<std::string> tcp = {"tcp"};
  const std::vector<std::string> both = {"tcp", "cuda_ipc"};
  struct Case {
    const char* name;
    KvTransportFlag flag;
    bool local_device;
    std::string local_host;
    std::vector<std::string> peer;
    std::string peer_host;
    // kOk with the path, or the error code.
    absl::StatusCode code;
    KvPath path;
  };
  const auto ok = absl::StatusCode::kOk;
  const auto fp = absl::StatusCode::kFailedPrecondition;
  const Case cases[] = {
      {"tcp always", KvTransportFlag::kTcp, false, "h", tcp, "h", ok, KvPath::kTcp},
      {"tcp even when ipc could", KvTransportFlag::kTcp, true, "h", both, "h", ok, KvPath::kTcp},
      {"auto picks ipc", KvTransportFlag::kAuto, true, "h", both, "h", ok, KvPath::kCudaIpc},
      {"auto: host pool", KvTransportFlag::kAuto, false, "h", both, "h", ok, KvPath::kTcp},
      {"auto: peer tcp only", KvTransportFlag::kAuto, true, "h", tcp, "h", ok, KvPath::kTcp},
      {"auto: old peer", KvTransportFlag::kAuto, true, "h", {}, "h", ok, KvPath::kTcp},
      {"auto: other node", KvTransportFlag::kAuto, true, "h", both, "g", ok, KvPath::kTcp},
      {"auto: unknown host", KvTransportFlag::kAuto, true, "", both, "", ok, KvPath::kTcp},
      {"ipc", KvTransportFlag::kCudaIpc, true, "h", both, "h", ok, KvPath::kCudaIpc},
      {"ipc: host pool", KvTransportFlag::kCudaIpc, false, "h", both, "h", fp, KvPath::kTcp},
      {"ipc: peer tcp only", KvTransportFlag::kCudaIpc, true, "h", tcp, "h", fp, KvPath::kTcp},
      {"ipc: other node", KvTransportFlag::kCudaIpc, true, "h", both, "g", fp, KvPath::kTcp},
  };
  for (const Case& c : cases) {
    absl::StatusOr<KvPath> got =
        ChooseKvPath(c.flag, {c.local_device, c.local_host, true}, {c.peer, c.peer_host});
    EXPECT_EQ(got.status().code(), c.code) << c.name << ": " << got.status();
    if (got.ok()) EXPECT_EQ(*got, c.path) << c.name;
  }
}

TEST(KvPathTest, NcclIsOnlyTakenWhenAskedForAndPossible) {
  const std::vector<std::string> all = {"tcp", "cuda_ipc", "nccl"};
  const std::vector<std::string> no_nccl = {"tcp", "cuda_ipc"};
  // Other nodes, both sides able: nccl when forced, tcp under auto.
  EXPECT_EQ(*ChooseKvPath(KvTransportFlag::kNccl, {true, "h", true}, {all, "g"}), KvPath::kNccl);
  EXPECT_EQ(*ChooseKvPath(KvTransportFlag::kAuto, {true, "h", true}, {all, "g"}), KvPath::kTcp);
  // One node: auto still prefers cuda_ipc.
  EXPECT_EQ(*ChooseKvPath(KvTransportFlag::kAuto, {true, "h", true}, {all, "h"}),
            KvPath::kCudaIpc);
  EXPECT_EQ(ChooseKvPath(KvTransportFlag::kNccl, {true, "h", false}, {all, "g"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ChooseKvPath(KvTransportFlag::kNccl, {false, "h", true}, {all, "g"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ChooseKvPath(KvTransportFlag::kNccl, {true, "h", true}, {no_nccl, "g"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(KvPathTest, AcceptedTransportsFollowThePool) {
  EXPECT_EQ(AcceptedKvTransports(false), std::vector<std::string>({"tcp"}));
  EXPECT_EQ(AcceptedKvTransports(true), std::vector<std::string>({"tcp", "cuda_ipc"}));
  EXPECT_EQ(AcceptedKvTransports(true, true),
            std::vector<std::string>({"tcp", "cuda_ipc", "nccl"}));
  EXPECT_EQ(AcceptedKvTransports(false, true), std::vector<std::string>({"tcp"}));
}

TEST(KvPathTest, HostIdIsStable) { EXPECT_EQ(LocalKvHostId(), LocalKvHostId()); }

}  // namespace
}  // namespace pdserve
