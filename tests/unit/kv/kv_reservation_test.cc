#include "common/kv/kv_reservation.h"

#include <algorithm>
#include <vector>

#include "common/request/token_logprobs.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::LayerHeader;
using ::pdserve::testing::SmallKvLayout;

constexpr int64_t kBpl = 128;

// Three layers whose layer blocks are kBpl bytes: 4 positions of one f16 head of 8.
KvLayout Layout128() {
  KvLayout l{.n_layers = 3, .n_kv_heads = 1, .head_dim = 8, .block_size = 4};
  EXPECT_EQ(l.bytes_per_layer_block(), kBpl);
  return l;
}

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
  KvReservation r(1, 1, {4, kKvBlockNotSent, 6}, 2, Layout128());
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
  KvReservation r(1, 1, {4}, 1, Layout128());
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
  KvReservation r(1, 1, {4, kKvBlockNotSent, 6}, 2, Layout128());
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
  KvReservation r(1, 1, {4, 6}, 2, Layout128());
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

// A window layer expects only the blocks its window reads after the prompt:
// with a window of 8 and 4-position blocks, the last 1 + ceil((8 - 1 + 63) /
// 4) = 19 blocks; the global layer expects every block.
TEST(KvReservationTest, AWindowLayerExpectsOnlyItsWindowsBlocks) {
  KvLayout layout = Layout128();
  layout.layer_window = {8, 0, 8};
  EXPECT_EQ(layout.FirstSentBlock(0, 30), 11);
  EXPECT_EQ(layout.FirstSentBlock(1, 30), 0);
  EXPECT_EQ(layout.FirstSentBlock(0, 12), 0);
  std::vector<int32_t> dst(30);
  for (int i = 0; i < 30; ++i) dst[i] = i;
  dst[0] = dst[1] = kKvBlockNotSent;  // a cached prefix
  KvReservation r(1, 1, dst, 3, layout);
  EXPECT_EQ(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, {10}, kBpl)).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint32_t> window, global;
  for (uint32_t b = 11; b < 30; ++b) window.push_back(b);
  for (uint32_t b = 2; b < 30; ++b) global.push_back(b);
  ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 0, window, kBpl)).ok());
  ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 1, global, kBpl)).ok());
  ASSERT_TRUE(r.ClaimLayerBlocks(LayerHeader(1, 1, 2, window, kBpl)).ok());
  const uint64_t bytes = (19 + 28 + 19) * kBpl;
  r.AddWrittenBytes(bytes);
  EXPECT_TRUE(r.CheckCommit(Commit(3, bytes)).ok());
}

// A prompt's window, as FirstSentBlock keeps it, covers every position a
// decode step reads: from the first decoded position's window start rounded
// down to kWindowReadAlign.
TEST(KvReservationTest, FirstSentBlockCoversWhatDecodeReads) {
  for (int32_t bs : {1, 4, 16, 48}) {
    for (int32_t w : {1, 7, 64, 512}) {
      KvLayout layout{.n_layers = 1, .n_kv_heads = 1, .head_dim = 8, .block_size = bs};
      layout.layer_window = {w};
      for (int32_t len = 1; len < 1500; len += 7) {
        const int32_t n_blocks = (len + bs - 1) / bs;
        const int32_t read_from =
            std::max(0, len - w + 1) / KvLayout::kWindowReadAlign * KvLayout::kWindowReadAlign;
        EXPECT_LE(layout.FirstSentBlock(0, n_blocks) * bs, read_from)
            << "block size " << bs << " window " << w << " length " << len;
      }
    }
  }
}

}  // namespace
}  // namespace pdserve
