#include "common/kv/kv_reservation.h"

#include "common/request/token_logprobs.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::LayerHeader;
using ::pdserve::testing::SmallKvLayout;

constexpr int64_t kBpl = 128;

v1::KvFrameHeader Commit(uint32_t layers, uint64_t bytes) {
  v1::KvFrameHeader h;
  h.set_kind(v1::KvFrameHeader::COMMIT);
  h.set_num_layers(layers);
  h.set_total_bytes(bytes);
  h.set_first_token(17);
  return h;
}

TEST(KvReservationTest, ValidateRejectsBadReservations) {
  const KvLayout layout = SmallKvLayout();
  EXPECT_TRUE(KvReservation::Validate({0, kKvBlockNotSent, 5}, 3, layout, 8).ok());
  EXPECT_TRUE(KvReservation::Validate({}, 1, layout, 8).ok());
  EXPECT_FALSE(KvReservation::Validate({0, 8}, 3, layout, 8).ok());
  EXPECT_FALSE(KvReservation::Validate({-2}, 3, layout, 8).ok());
  EXPECT_FALSE(KvReservation::Validate({3, 3}, 3, layout, 8).ok());
  EXPECT_FALSE(KvReservation::Validate({0}, 0, layout, 8).ok());
  EXPECT_FALSE(KvReservation::Validate({0}, 4, layout, 8).ok());
}

TEST(KvReservationTest, CompletesWhenEveryCellArrived) {
  KvReservation r(1, 1, {4, kKvBlockNotSent, 6}, 2, kBpl);
  for (uint32_t layer = 0; layer < 2; ++layer) {
    ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, layer, {2, 0}, kBpl)).ok());
    EXPECT_EQ(r.dst_block(0), 4);
    EXPECT_EQ(r.dst_block(2), 6);
    r.AddWrittenBytes(2 * kBpl);
  }
  absl::StatusOr<KvCommit> commit = r.CheckCommit(Commit(2, 4 * kBpl));
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(commit->total_bytes, static_cast<uint64_t>(4 * kBpl));
  EXPECT_EQ(commit->first_token, 17);
  EXPECT_FALSE(commit->first_token_logprobs.has_value());
}

// The first token's logprobs come off the commit header unchanged.
TEST(KvReservationTest, CommitCarriesTheFirstTokensLogprobs) {
  KvReservation r(1, 1, {4}, 1, kBpl);
  ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {0}, kBpl)).ok());
  r.AddWrittenBytes(kBpl);
  v1::KvFrameHeader header = Commit(1, kBpl);
  v1::TokenLogprobs* wire = header.mutable_first_token_logprobs();
  wire->set_token(17);
  wire->set_logprob(-0.75f);
  v1::TopLogprob* top = wire->add_top();
  top->set_token(3);
  top->set_logprob(-0.5f);
  top = wire->add_top();
  top->set_token(17);
  top->set_logprob(-0.75f);
  absl::StatusOr<KvCommit> commit = r.CheckCommit(header);
  ASSERT_TRUE(commit.ok()) << commit.status();
  const TokenLogprobs expected{17, -0.75f, {{3, -0.5f}, {17, -0.75f}}};
  EXPECT_EQ(commit->first_token_logprobs, expected);
}

TEST(KvReservationTest, RejectsFramesThatDoNotFit) {
  KvReservation r(1, 1, {4, kKvBlockNotSent, 6}, 2, kBpl);
  EXPECT_EQ(r.ClaimLayerBlocks(LayerHeader(1, 1, 2, {0}, kBpl)).code(),
            absl::StatusCode::kInvalidArgument);  // layer
  EXPECT_EQ(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {3}, kBpl)).code(),
            absl::StatusCode::kInvalidArgument);  // block index
  EXPECT_EQ(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {1}, kBpl)).code(),
            absl::StatusCode::kInvalidArgument);  // held by the receiver
  EXPECT_EQ(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {0, 0}, kBpl)).code(),
            absl::StatusCode::kInvalidArgument);  // duplicate in frame
  ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {0}, kBpl)).ok());
  EXPECT_EQ(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {2, 0}, kBpl)).code(),
            absl::StatusCode::kInvalidArgument);  // duplicate across frames
  // A rejected frame claims nothing: block 2 of layer 0 is still free.
  EXPECT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {2}, kBpl)).ok());
}

TEST(KvReservationTest, CommitMismatchIsDataLoss) {
  KvReservation r(1, 1, {4, 6}, 2, kBpl);
  ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {0, 1}, kBpl)).ok());
  r.AddWrittenBytes(2 * kBpl);
  // Layer 1 missing, whatever the sender claims.
  EXPECT_EQ(r.CheckCommit(Commit(2, 2 * kBpl)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(r.CheckCommit(Commit(2, 4 * kBpl)).status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 1, {0, 1}, kBpl)).ok());
  // Claimed but the payload has not fully arrived yet.
  EXPECT_EQ(r.CheckCommit(Commit(2, 4 * kBpl)).status().code(), absl::StatusCode::kDataLoss);
  r.AddWrittenBytes(2 * kBpl);
  EXPECT_EQ(r.CheckCommit(Commit(3, 4 * kBpl)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(r.CheckCommit(Commit(2, 4 * kBpl + 1)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(r.CheckCommit(Commit(2, 4 * kBpl)).ok());
}

}  // namespace
}  // namespace pdserve
