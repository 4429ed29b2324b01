// Worker configs refuse bad --device, --kv_transport and --metrics_port
// values, a cuda_ipc path without a GPU, and int8 KV on a GPU, before
// anything starts.
#include <utility>

#include "decode_worker/decode_worker.h"
#include "gtest/gtest.h"
#include "prefill_worker/prefill_worker.h"

namespace pdserve {
namespace {

using decode::DecodeWorker;
using decode::DecodeWorkerConfig;
using prefill::PrefillWorker;
using prefill::PrefillWorkerConfig;

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

// int8 KV has no CUDA kernels: a GPU worker asking for it is refused at
// start-up, naming the flag, instead of failing every request's first step.
TEST(WorkerConfigTest, Int8KvIsRefusedOnACudaDevice) {
  for (const char* device : {"cuda", "cuda:0", "cuda:3"}) {
    DecodeWorkerConfig d;
    d.model_path = "model.gguf";
    d.runtime.device = device;
    d.runtime.kv_dtype = "int8";
    PrefillWorkerConfig p = Prefill(device, "auto");
    p.runtime.kv_dtype = "int8";
    for (const absl::Status& st : {d.Validate(), p.Validate()}) {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << device << ": " << st;
      EXPECT_NE(st.message().find("--kv_dtype=int8 runs on the CPU only"), std::string::npos) << st;
    }
  }
  DecodeWorkerConfig cpu;
  cpu.model_path = "model.gguf";
  cpu.runtime.kv_dtype = "int8";
  EXPECT_TRUE(cpu.Validate().ok());
}

TEST(WorkerConfigTest, MetricsPortIsOffAnyOrAPort) {
  for (const auto& [port, ok] :
       {std::pair{0, true}, std::pair{-1, true}, std::pair{9090, true}, std::pair{65535, true},
        std::pair{-2, false}, std::pair{65536, false}}) {
    DecodeWorkerConfig d;
    d.model_path = "model.gguf";
    d.metrics_port = port;
    PrefillWorkerConfig p = Prefill("cpu", "auto");
    p.metrics_port = port;
    for (const absl::Status& st : {d.Validate(), p.Validate()}) {
      EXPECT_EQ(st.ok(), ok) << port << ": " << st;
      if (!ok) EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << port;
    }
  }
}

}  // namespace
}  // namespace pdserve
