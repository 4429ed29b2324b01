// pdserve_gpu_transfer_bench: KV transfer bandwidth on one GPU, for 1, 16
// and 64 MB, side by side in one run with a plain device-to-device copy of
// the same bytes (the ceiling):
//   d2d         cudaMemcpyAsync device to device
//   nccl_self   NCCL send + receive of a rank to itself in one group call
//               (one GPU cannot hold two ranks; two GPUs would use P2P/NVLink)
//   tcp_staged  the TCP transport between two device KV caches (gather to
//               host, loopback TCP, scatter to device): the cross-process
//               path for --device=cuda workers without a device path
//   cuda_ipc    the TCP transport's cuda_ipc path between two processes on
//               the GPU (this binary re-runs itself as the prefill side; the
//               receiver pulls the blocks device to device): what two
//               --device=cuda workers of one node use (auto)
// Each figure is the best of --rounds. Prints one "GPU_BENCH transfer" line
// per size for tests/gpu/device_check.sh.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/base/status_macros.h"
#include "common/gpu/cuda/cuda_device.h"
#include "common/gpu/cuda/device_buffer.h"
#include "common/gpu/nccl/nccl_communicator.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "common/runtime/runtime_factory.h"
#include "glog/logging.h"

ABSL_FLAG(int, rounds, 5, "timed rounds per figure; the best is reported");
ABSL_FLAG(int, device, 0, "CUDA device");
ABSL_FLAG(int, ipc_child_port, 0,
          "internal: run as the cuda_ipc sender to this local receiver port");
ABSL_FLAG(int, ipc_child_blocks, 0, "internal: blocks per cuda_ipc transfer");

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

std::vector<int32_t> Iota(int32_t n) {
  std::vector<int32_t> ids(n);
  for (int32_t i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

// One transfer of every layer of enough SmolLM2 blocks to make `bytes`.
absl::StatusOr<double> TcpStaged(size_t bytes, int device) {
  const KvLayout layout = KvLayout::SmolLm2();
  const size_t per_block = layout.bytes_per_layer_block() * layout.n_layers;
  const int32_t blocks = static_cast<int32_t>(std::max<size_t>(1, bytes / per_block));
  const DeviceSpec spec{DeviceSpec::Kind::kCuda, device};
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> src, CreateKvCache(spec, layout, blocks));
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> dst, CreateKvCache(spec, layout, blocks));
  FramedKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  ASSIGN_OR_RETURN(std::unique_ptr<FramedKvReceiver> receiver, FramedKvReceiver::Create(dst.get(), ro));
  ASSIGN_OR_RETURN(std::unique_ptr<FramedKvSender> sender, FramedKvSender::Create());
  const std::vector<int32_t> ids = Iota(blocks);
  uint64_t next_id = 1;
  return Best([&]() -> absl::Status {
    const uint64_t id = next_id++;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::Notification done;
    absl::Status result;
    RETURN_IF_ERROR(
        receiver->Expect(id, 1, ids, layout.n_layers, deadline, [&](absl::StatusOr<KvCommit> c) {
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

// The child of CudaIpc: sends transfers 1..rounds over cuda_ipc, one at a
// time, and prints the best time of one (every layer sent, commit acked,
// which D sends after it pulled every block).
absl::Status RunIpcChild() {
  const KvLayout layout = KvLayout::SmolLm2();
  const int32_t blocks = absl::GetFlag(FLAGS_ipc_child_blocks);
  const DeviceSpec spec{DeviceSpec::Kind::kCuda, absl::GetFlag(FLAGS_device)};
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> src, CreateKvCache(spec, layout, blocks));
  FramedKvSenderOptions so;
  so.device_pool = src.get();
  ASSIGN_OR_RETURN(std::unique_ptr<FramedKvSender> sender, FramedKvSender::Create(so));
  const std::vector<int32_t> ids = Iota(blocks);
  uint64_t next_id = 1;
  ASSIGN_OR_RETURN(double best, Best([&]() -> absl::Status {
                     KvTransferTarget target{
                         absl::StrCat("127.0.0.1:", absl::GetFlag(FLAGS_ipc_child_port)), next_id++,
                         1, absl::Now() + absl::Seconds(30)};
                     target.path = KvPath::kCudaIpc;
                     for (int l = 0; l < layout.n_layers; ++l) {
                       RETURN_IF_ERROR(sender->SendLayer(target, l, ids, *src, ids));
                     }
                     return sender->Commit(target, KvCommit{layout.n_layers, 0, 0});
                   }));
  std::printf("IPC_BEST %.9f\n", best);
  return absl::OkStatus();
}

// cuda_ipc between two processes: this one receives, a child sends.
absl::StatusOr<double> CudaIpc(size_t bytes, int device) {
  const KvLayout layout = KvLayout::SmolLm2();
  const size_t per_block = layout.bytes_per_layer_block() * layout.n_layers;
  const int32_t blocks = static_cast<int32_t>(std::max<size_t>(1, bytes / per_block));
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> dst,
                   CreateKvCache(DeviceSpec{DeviceSpec::Kind::kCuda, device}, layout, blocks));
  // Before the receiver, whose commit callbacks count into it until the
  // receiver is destroyed.
  std::atomic<int> failed{0};
  FramedKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  ASSIGN_OR_RETURN(std::unique_ptr<FramedKvReceiver> receiver, FramedKvReceiver::Create(dst.get(), ro));
  // Every round's reservation up front: the child runs them back to back.
  const int rounds = absl::GetFlag(FLAGS_rounds);
  for (int r = 1; r <= rounds; ++r) {
    RETURN_IF_ERROR(receiver->Expect(r, 1, Iota(blocks), layout.n_layers,
                                     absl::Now() + absl::Seconds(120),
                                     [&](absl::StatusOr<KvCommit> c) {
                                       if (!c.ok()) failed.fetch_add(1);
                                     }));
  }
  // popen runs the command through /bin/sh, for which /proc/self/exe
  // would be the shell: resolve this binary's path here.
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) return absl::InternalError("cuda_ipc bench: cannot resolve /proc/self/exe");
  self.resize(static_cast<size_t>(n));
  const std::string cmd =
      absl::StrCat("'", self, "' --ipc_child_port=", receiver->port(),
                   " --ipc_child_blocks=", blocks, " --rounds=", rounds, " --device=", device);
  FILE* child = popen(cmd.c_str(), "r");
  if (child == nullptr) return absl::InternalError("cuda_ipc bench: cannot start the sender");
  double best = -1;
  char line[256];
  while (std::fgets(line, sizeof(line), child) != nullptr) {
    std::sscanf(line, "IPC_BEST %lf", &best);
  }
  const int rc = pclose(child);
  if (rc != 0 || best <= 0 || failed.load() > 0) {
    return absl::InternalError(absl::StrCat("cuda_ipc bench: sender exited ", rc, ", ",
                                            failed.load(), " transfers failed"));
  }
  return best;
}

absl::Status Run() {
  const int device = absl::GetFlag(FLAGS_device);
  ASSIGN_OR_RETURN(std::string what, cuda::DeviceDescription(device));
  std::printf("device %d: %s\n", device, what.c_str());
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  ASSIGN_OR_RETURN(std::string id, nccl::NcclCommunicator::NewUniqueId());
  ASSIGN_OR_RETURN(
      std::unique_ptr<nccl::NcclCommunicator> comm,
      nccl::NcclCommunicator::Connect(
          id,
          {.nranks = 1, .rank = 0, .device = device, .deadline = absl::Now() + absl::Seconds(60)}));
  for (size_t mb : {1, 16, 64}) {
    const size_t bytes = mb << 20;
    ASSIGN_OR_RETURN(double d2d, DeviceCopy(bytes, stream));
    ASSIGN_OR_RETURN(double nccl_self, NcclSelf(*comm, bytes, stream));
    ASSIGN_OR_RETURN(double tcp, TcpStaged(bytes, device));
    // A failure here leaves the other figures standing.
    absl::StatusOr<double> ipc = CudaIpc(bytes, device);
    if (!ipc.ok()) LOG(ERROR) << ipc.status();
    std::printf(
        "GPU_BENCH transfer size_mb=%zu d2d_gbps=%.1f nccl_self_gbps=%.1f "
        "nccl_vs_d2d=%.2f tcp_staged_gbps=%.2f cuda_ipc_gbps=%.2f ipc_vs_d2d=%.2f\n",
        mb, bytes / d2d / 1e9, bytes / nccl_self / 1e9, d2d / nccl_self, bytes / tcp / 1e9,
        ipc.ok() ? bytes / *ipc / 1e9 : 0.0, ipc.ok() ? d2d / *ipc : 0.0);
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
  const absl::Status st =
      absl::GetFlag(FLAGS_ipc_child_port) > 0 ? pdserve::RunIpcChild() : pdserve::Run();
  if (!st.ok()) {
    std::fprintf(stderr, "pdserve_gpu_transfer_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
