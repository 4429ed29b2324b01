// pdserve_gpu_transfer_bench: KV transfer bandwidth on one GPU, for 1, 16
// and 64 MB, side by side in one run with a plain device-to-device copy of
// the same bytes (the ceiling):
//   d2d         cudaMemcpyAsync device to device
//   nccl_self   NCCL send + receive of a rank to itself in one group call
//               (one GPU cannot hold two ranks; two GPUs would use P2P/NVLink)
//   tcp_staged  the TCP transport between two device KV caches (gather to
//               host, loopback TCP, scatter to device): today's cross-process
//               path for --device=cuda workers
// Each figure is the best of --rounds. Prints one "GPU_BENCH transfer" line
// per size for tests/gpu/device_check.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/cuda/cuda_device.h"
#include "common/cuda/device_buffer.h"
#include "common/nccl/nccl_communicator.h"
#include "common/runtime_factory.h"
#include "common/status_macros.h"
#include "common/tcp_kv_receiver.h"
#include "common/tcp_kv_sender.h"
#include "glog/logging.h"

ABSL_FLAG(int, rounds, 5, "timed rounds per figure; the best is reported");
ABSL_FLAG(int, device, 0, "CUDA device");

namespace pdserve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

template <typename F>
absl::StatusOr<double> Best(F&& once) {
  double best = 1e30;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    const Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(once());
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

absl::StatusOr<double> DeviceCopy(size_t bytes, cudaStream_t stream) {
  cuda::DeviceBuffer a, b;
  RETURN_IF_ERROR(a.Reserve(bytes));
  RETURN_IF_ERROR(b.Reserve(bytes));
  return Best([&]() -> absl::Status {
    PDSERVE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  });
}

absl::StatusOr<double> NcclSelf(nccl::NcclCommunicator& comm, size_t bytes, cudaStream_t stream) {
  cuda::DeviceBuffer a, b;
  RETURN_IF_ERROR(a.Reserve(bytes));
  RETURN_IF_ERROR(b.Reserve(bytes));
  return Best([&]() -> absl::Status {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    RETURN_IF_ERROR(comm.GroupStart());
    RETURN_IF_ERROR(comm.Send(a.get(), bytes, 0, stream));
    RETURN_IF_ERROR(comm.Recv(b.get(), bytes, 0, stream));
    RETURN_IF_ERROR(comm.GroupEnd(deadline));
    return comm.Wait(stream, deadline);
  });
}

// One transfer of every layer of enough SmolLM2 blocks to make `bytes`.
absl::StatusOr<double> TcpStaged(size_t bytes, int device) {
  const KvLayout layout = KvLayout::SmolLm2();
  const size_t per_block = layout.bytes_per_layer_block() * layout.n_layers;
  const int32_t blocks = static_cast<int32_t>(std::max<size_t>(1, bytes / per_block));
  const DeviceSpec spec{DeviceSpec::Kind::kCuda, device};
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> src, CreateKvCache(spec, layout, blocks));
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> dst, CreateKvCache(spec, layout, blocks));
  TcpKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  ASSIGN_OR_RETURN(std::unique_ptr<TcpKvReceiver> receiver, TcpKvReceiver::Create(dst.get(), ro));
  ASSIGN_OR_RETURN(std::unique_ptr<TcpKvSender> sender, TcpKvSender::Create());
  std::vector<int32_t> ids(blocks);
  for (int32_t i = 0; i < blocks; ++i) ids[i] = i;
  uint64_t next_id = 1;
  return Best([&]() -> absl::Status {
    const uint64_t id = next_id++;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::Notification done;
    absl::Status result;
    RETURN_IF_ERROR(receiver->Expect(id, 1, ids, layout.n_layers, deadline,
                                     [&](absl::StatusOr<KvCommit> c) {
                                       result = c.status();
                                       done.Notify();
                                     }));
    const KvTransferTarget target{absl::StrCat("127.0.0.1:", receiver->port()), id, 1, deadline};
    for (int l = 0; l < layout.n_layers; ++l) {
      RETURN_IF_ERROR(sender->SendLayer(target, l, ids, *src, ids));
    }
    RETURN_IF_ERROR(sender->Commit(target, KvCommit{layout.n_layers, 0, 0}));
    done.WaitForNotification();
    return result;
  });
}

absl::Status Run() {
  const int device = absl::GetFlag(FLAGS_device);
  ASSIGN_OR_RETURN(std::string what, cuda::DeviceDescription(device));
  std::printf("device %d: %s\n", device, what.c_str());
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  ASSIGN_OR_RETURN(std::string id, nccl::NcclCommunicator::NewUniqueId());
  ASSIGN_OR_RETURN(std::unique_ptr<nccl::NcclCommunicator> comm,
                   nccl::NcclCommunicator::Connect(
                       id, {.nranks = 1, .rank = 0, .device = device,
                            .deadline = absl::Now() + absl::Seconds(60)}));
  for (size_t mb : {1, 16, 64}) {
    const size_t bytes = mb << 20;
    ASSIGN_OR_RETURN(double d2d, DeviceCopy(bytes, stream));
    ASSIGN_OR_RETURN(double nccl_self, NcclSelf(*comm, bytes, stream));
    ASSIGN_OR_RETURN(double tcp, TcpStaged(bytes, device));
    std::printf(
        "GPU_BENCH transfer size_mb=%zu d2d_gbps=%.1f nccl_self_gbps=%.1f "
        "nccl_vs_d2d=%.2f tcp_staged_gbps=%.2f\n",
        mb, bytes / d2d / 1e9, bytes / nccl_self / 1e9, d2d / nccl_self, bytes / tcp / 1e9);
  }
  comm.reset();
  cudaStreamDestroy(stream);
  return absl::OkStatus();
}

}  // namespace
}  // namespace pdserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  const absl::Status st = pdserve::Run();
  if (!st.ok()) {
    std::fprintf(stderr, "pdserve_gpu_transfer_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
