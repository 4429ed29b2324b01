// NCCL on one GPU: a rank sends KV blocks to itself inside a group call
// (NCCL refuses two ranks on one device), gathered from one device cache
// and scattered into another, the path a prefill->decode transfer takes;
// a receive nobody sends to fails and aborts the communicator; and a
// connect whose peer never comes ends at its deadline instead of hanging.
// Two-rank transfers need two GPUs and are not exercised here.
// Skips without a CUDA device.
#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "common/gpu/cuda/block_copy_kernels.h"
#include "common/gpu/cuda/cuda_device.h"
#include "common/gpu/cuda/device_buffer.h"
#include "common/gpu/nccl/nccl_communicator.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_env.h"

namespace pdserve {
namespace {

using cuda::DeviceBuffer;
using nccl::NcclCommunicator;

class NcclTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::NoGpu()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    auto id = NcclCommunicator::NewUniqueId();
    ASSERT_TRUE(id.ok()) << id.status();
    auto comm = NcclCommunicator::Connect(
        *id, {.nranks = 1, .rank = 0, .device = 0, .deadline = absl::Now() + absl::Seconds(60)});
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = std::move(*comm);
  }
  void TearDown() override {
    comm_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<NcclCommunicator> comm_;
};

TEST_F(NcclTransferTest, GatheredBlocksArriveInTheirTargetBlocks) {
  constexpr size_t kBlock = 12288, kBlocks = 64;
  DeviceBuffer src_pool, dst_pool, send_staging, recv_staging, src_ptrs, dst_ptrs;
  ASSERT_TRUE(src_pool.Reserve(kBlock * kBlocks).ok());
  ASSERT_TRUE(dst_pool.Reserve(kBlock * kBlocks).ok());
  ASSERT_TRUE(send_staging.Reserve(kBlock * 8).ok());
  ASSERT_TRUE(recv_staging.Reserve(kBlock * 8).ok());
  std::vector<uint8_t> host(kBlock * kBlocks);
  std::mt19937 rng(3);
  for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
  ASSERT_EQ(cudaMemcpy(src_pool.get(), host.data(), host.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemset(dst_pool.get(), 0, host.size()), cudaSuccess);
  const std::vector<int> from = {5, 63, 0, 17, 33, 2, 9, 40};
  const std::vector<int> to = {1, 2, 3, 60, 61, 62, 20, 21};
  std::vector<const uint8_t*> src(from.size());
  std::vector<uint8_t*> dst(to.size());
  for (size_t i = 0; i < from.size(); ++i) {
    src[i] = src_pool.get<uint8_t>() + from[i] * kBlock;
    dst[i] = dst_pool.get<uint8_t>() + to[i] * kBlock;
  }
  ASSERT_TRUE(src_ptrs.Reserve(src.size() * sizeof(void*)).ok());
  ASSERT_TRUE(dst_ptrs.Reserve(dst.size() * sizeof(void*)).ok());
  cudaMemcpy(src_ptrs.get(), src.data(), src.size() * sizeof(void*), cudaMemcpyHostToDevice);
  cudaMemcpy(dst_ptrs.get(), dst.data(), dst.size() * sizeof(void*), cudaMemcpyHostToDevice);

  cuda::LaunchGatherBlocks(src_ptrs.get<const uint8_t* const>(), kBlock, src.size(),
                           send_staging.get<uint8_t>(), stream_);
  const size_t bytes = kBlock * src.size();
  ASSERT_TRUE(comm_->GroupStart().ok());
  ASSERT_TRUE(comm_->Send(send_staging.get(), bytes, 0, stream_).ok());
  ASSERT_TRUE(comm_->Recv(recv_staging.get(), bytes, 0, stream_).ok());
  ASSERT_TRUE(comm_->GroupEnd(absl::Now() + absl::Seconds(30)).ok());
  cuda::LaunchScatterBlocks(recv_staging.get<uint8_t>(), kBlock, dst.size(),
                            dst_ptrs.get<uint8_t* const>(), stream_);
  ASSERT_TRUE(comm_->Wait(stream_, absl::Now() + absl::Seconds(30)).ok());

  std::vector<uint8_t> out(host.size());
  ASSERT_EQ(cudaMemcpy(out.data(), dst_pool.get(), out.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < from.size(); ++i) {
    EXPECT_EQ(std::memcmp(out.data() + to[i] * kBlock, host.data() + from[i] * kBlock, kBlock), 0)
        << "block " << i;
  }
  EXPECT_EQ(out[0], 0);  // block 0 was not a target
}

// NCCL may refuse an unmatched self-receive at once (invalid usage) rather
// than run it: either way the receive fails and the communicator is
// aborted, never used again.
TEST_F(NcclTransferTest, UnmatchedReceiveFailsAndAborts) {
  DeviceBuffer buf;
  ASSERT_TRUE(buf.Reserve(1 << 20).ok());
  const absl::Time deadline = absl::Now() + absl::Milliseconds(500);
  absl::Status st = comm_->GroupStart();
  if (st.ok()) st = comm_->Recv(buf.get(), 1 << 20, 0, stream_);
  if (st.ok()) st = comm_->GroupEnd(deadline);
  if (st.ok()) st = comm_->Wait(stream_, deadline);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(comm_->aborted());
  EXPECT_EQ(comm_->Send(buf.get(), 1, 0, stream_).code(), absl::StatusCode::kAborted);
}

// A deadline that really expires on one GPU: rank 0 of a two-rank
// communicator whose rank 1 never comes waits in NCCL's bootstrap until
// the deadline, then aborts it (ncclCommAbort) and says so.
TEST_F(NcclTransferTest, ConnectWithoutItsPeerEndsAtItsDeadline) {
  auto id = NcclCommunicator::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::Time start = absl::Now();
  auto comm = NcclCommunicator::Connect(
      *id, {.nranks = 2, .rank = 0, .device = 0, .deadline = start + absl::Milliseconds(800)});
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(800));
  std::cout << "GPU_CHECK nccl_connect_deadline returned after "
            << absl::ToInt64Milliseconds(absl::Now() - start) << " ms: " << comm.status() << "\n";
}

}  // namespace
}  // namespace pdserve
