// Worker configs refuse bad --device, --kv_transport and --metrics_port
// values, and a cuda_ipc path without a GPU, before anything starts.
#include "decode_worker/decode_worker.h"
#include "gtest/gtest.h"
#include "prefill_worker/prefill_worker.h"

namespace pdserve {
namespace {

PrefillWorkerConfig Prefill(const std::string& device, const std::string& transport) {
  PrefillWorkerConfig c;
  c.model_path = "model.gguf";
  c.runtime.device = device;
  c.kv_transport = transport;
  return c;
}

TEST(WorkerConfigTest, PrefillDeviceAndTransport) {
  struct Case {
    const char* device;
    const char* transport;
    bool ok;
  };
  for (const Case& c :
       {Case{"cpu", "auto", true}, Case{"cpu", "tcp", true}, Case{"cuda:0", "cuda_ipc", true},
        Case{"cuda", "auto", true}, Case{"cpu", "cuda_ipc", false}, Case{"gpu", "auto", false},
        Case{"cpu", "nccl", false}, Case{"cuda:0", "nccl", true}, Case{"cpu", "", false},
        Case{"cpu", "NCCL", false}}) {
    const absl::Status st = Prefill(c.device, c.transport).Validate();
    EXPECT_EQ(st.ok(), c.ok) << c.device << " / " << c.transport << ": " << st;
    if (!c.ok) EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(WorkerConfigTest, DecodeDevice) {
  DecodeWorkerConfig c;
  c.model_path = "model.gguf";
  EXPECT_TRUE(c.Validate().ok());
  c.runtime.device = "cuda:1";
  EXPECT_TRUE(c.Validate().ok());
  c.runtime.device = "cuda:";
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerConfigTest, MetricsPortIsOffAnyOrAPort) {
  for (int port : {0, -1, 9090, 65535}) {
    DecodeWorkerConfig d;
    d.model_path = "model.gguf";
    d.metrics_port = port;
    EXPECT_TRUE(d.Validate().ok()) << port;
    PrefillWorkerConfig p = Prefill("cpu", "auto");
    p.metrics_port = port;
    EXPECT_TRUE(p.Validate().ok()) << port;
  }
  for (int port : {-2, 65536}) {
    DecodeWorkerConfig d;
    d.model_path = "model.gguf";
    d.metrics_port = port;
    EXPECT_EQ(d.Validate().code(), absl::StatusCode::kInvalidArgument) << port;
    PrefillWorkerConfig p = Prefill("cpu", "auto");
    p.metrics_port = port;
    EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument) << port;
  }
}

}  // namespace
}  // namespace pdserve
