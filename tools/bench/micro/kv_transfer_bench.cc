// pdserve_kv_bench: KV data plane throughput on loopback, measured against
// a raw TCP stream of the same size in the same run (the goal:
// transport >= 70% of raw loopback TCP, docs/PERFORMANCE.md).
//
// The transport moves whole prompts' KV in the SmolLM2-135M layout (30
// layers, 3 kv heads, head dim 64, block 16, f16: 12288 B per layer-block;
// --kv_dtype=int8: 6528 B),
// one frame per layer, commit + ack per prompt, exactly as a prefill worker
// would. The raw baseline writes the same number of bytes in the same
// frame-sized chunks through one asio socket, with no framing and no acks,
// from and into buffers as large as one transfer's KV. Each side is
// timed --rounds times, alternating, and the best round is reported. With
// --tls_cert/--tls_key/--tls_ca the transport runs over mutual TLS (the
// workers' --kv_tls) and the raw baseline stays plain: the ratio is then
// the encryption's whole cost.
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/base/status_macros.h"
#include "common/engine/kv_cache.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "common/tls/reloading_tls_context.h"
#include "glog/logging.h"

ABSL_FLAG(int, mb, 512, "MiB of KV to move per round, each way of measuring");
ABSL_FLAG(int, prompt_tokens, 512, "tokens per transfer (one prompt's KV)");
ABSL_FLAG(int, rounds, 3, "timed rounds per side; the best one is reported");
ABSL_FLAG(int, socket_buffer_bytes, 0,
          "SO_SNDBUF / SO_RCVBUF for both the transport and the raw stream; 0 = autotuning");
ABSL_FLAG(std::string, kv_dtype, "f16", "KV layout moved: f16 or int8 (quantised rows + scales)");
ABSL_FLAG(std::string, tls_cert, "",
          "With --tls_key and --tls_ca: the transport runs mutual TLS (--kv_tls), this "
          "certificate on both ends");
ABSL_FLAG(std::string, tls_key, "", "Private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "", "CA that signed --tls_cert");

namespace pdserve {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Plan {
  KvLayout layout = KvLayout::SmolLm2();
  int32_t blocks = 0;      // per transfer
  int transfers = 0;       // per round
  size_t frame_bytes = 0;  // one layer of one transfer
  size_t total_bytes() const { return frame_bytes * layout.n_layers * transfers; }
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// User + system CPU seconds of all threads of this process so far. On a
// shared machine wall time is noisy; CPU per byte is not.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct Timing {
  double wall = 1e30;
  double cpu = 1e30;
};

// Moves plan.transfers prompts through the transport and checks the bytes.
absl::Status MoveThroughTransport(const Plan& plan, KvCache& src, KvCache& dst,
                                  FramedKvReceiver& receiver, KvSender& sender, uint64_t* next_id) {
  std::vector<int32_t> logical(plan.blocks), src_ids(plan.blocks), dst_ids(plan.blocks);
  for (int32_t i = 0; i < plan.blocks; ++i) {
    logical[i] = i;
    src_ids[i] = i;
    dst_ids[i] = plan.blocks - 1 - i;  // a non-identity mapping, as in real use
  }
  const std::string endpoint = absl::StrCat("127.0.0.1:", receiver.port());
  for (int t = 0; t < plan.transfers; ++t) {
    const uint64_t id = (*next_id)++;
    const KvTransferTarget target{endpoint, id, 1, absl::Now() + absl::Seconds(30)};
    absl::Status done = absl::UnknownError("pending");
    absl::Notification notified;
    absl::Status st = receiver.Expect(id, 1, dst_ids, plan.layout.n_layers, target.deadline,
                                      [&](absl::StatusOr<KvCommit> r) {
                                        done = r.status();
                                        notified.Notify();
                                      });
    for (int l = 0; st.ok() && l < plan.layout.n_layers; ++l) {
      st = sender.SendLayer(target, l, logical, src, src_ids);
    }
    if (st.ok()) st = sender.Commit(target, KvCommit{plan.layout.n_layers, 0, 0});
    if (!st.ok()) return st;
    notified.WaitForNotification();
    if (!done.ok()) return done;
  }
  for (int l = 0; l < plan.layout.n_layers; ++l) {
    if (memcmp(src.LayerBlock(l, 0), dst.LayerBlock(l, plan.blocks - 1),
               plan.frame_bytes / plan.blocks) != 0) {
      return absl::DataLossError("transport delivered wrong bytes");
    }
  }
  return absl::OkStatus();
}

// The same bytes, in the same chunk sizes, over a plain socket.
void StreamRawTcp(const Plan& plan, const std::vector<uint8_t>& src, std::vector<uint8_t>& dst) {
  asio::io_context io;
  const tcp::endpoint loopback(asio::ip::address_v4::loopback(), 0);
  tcp::acceptor acceptor(io, loopback.protocol());
  const int buffer_bytes = absl::GetFlag(FLAGS_socket_buffer_bytes);
  if (buffer_bytes > 0) acceptor.set_option(asio::socket_base::receive_buffer_size(buffer_bytes));
  acceptor.bind(loopback);
  acceptor.listen();
  tcp::socket writer(io);
  writer.connect(acceptor.local_endpoint());
  if (buffer_bytes > 0) writer.set_option(asio::socket_base::send_buffer_size(buffer_bytes));
  tcp::socket reader = acceptor.accept();
  writer.set_option(tcp::no_delay(true));
  const size_t total = plan.total_bytes();
  std::thread read_thread([&] {
    size_t got = 0;
    while (got < total) {
      const size_t at = got % dst.size();
      const size_t want = std::min(dst.size() - at, total - got);
      got += reader.read_some(asio::buffer(dst.data() + at, want));
    }
  });
  for (size_t sent = 0; sent < total;) {
    const size_t at = sent % src.size();
    const size_t chunk = std::min({plan.frame_bytes, src.size() - at, total - sent});
    size_t off = 0;
    while (off < chunk) off += writer.write_some(asio::buffer(src.data() + at + off, chunk - off));
    sent += chunk;
  }
  read_thread.join();
}

// Everything one run needs, built once and reused by every round.
struct Bench {
  Plan plan;
  std::unique_ptr<KvCache> src, dst;
  std::unique_ptr<FramedKvReceiver> receiver;
  std::unique_ptr<FramedKvSender> sender;
  // As large as one transfer's KV, so that both sides stream through the
  // same amount of memory (a frame-sized buffer would stay in L2).
  std::vector<uint8_t> raw_src, raw_dst;
  uint64_t next_id = 1;
};

absl::Status Setup(Bench& b) {
  Plan& plan = b.plan;
  plan.layout.dtype = absl::GetFlag(FLAGS_kv_dtype);
  RETURN_IF_ERROR(ValidateKvDtype(plan.layout.dtype));
  plan.blocks = BlocksForTokens(absl::GetFlag(FLAGS_prompt_tokens), plan.layout.block_size);
  plan.frame_bytes = static_cast<size_t>(plan.blocks * plan.layout.bytes_per_layer_block());
  const size_t transfer_bytes = plan.frame_bytes * plan.layout.n_layers;
  plan.transfers = static_cast<int>(
      std::max<size_t>(1, (size_t{1} << 20) * absl::GetFlag(FLAGS_mb) / transfer_bytes));
  ASSIGN_OR_RETURN(b.src, KvCache::Create(plan.layout, plan.blocks));
  ASSIGN_OR_RETURN(b.dst, KvCache::Create(plan.layout, plan.blocks));
  std::mt19937 rng(1);
  for (int l = 0; l < plan.layout.n_layers; ++l) {
    uint8_t* p = b.src->LayerBlock(l, 0);
    for (size_t i = 0; i < plan.frame_bytes; ++i) p[i] = static_cast<uint8_t>(rng());
  }
  b.raw_src.resize(transfer_bytes);
  b.raw_dst.resize(transfer_bytes);
  for (uint8_t& x : b.raw_src) x = static_cast<uint8_t>(rng());

  const int buffer_bytes = absl::GetFlag(FLAGS_socket_buffer_bytes);
  std::shared_ptr<ReloadingTlsContext> tls;
  if (!absl::GetFlag(FLAGS_tls_cert).empty()) {
    ASSIGN_OR_RETURN(
        tls, ReloadingTlsContext::Load({absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                                        absl::GetFlag(FLAGS_tls_ca)}));
  }
  FramedKvReceiverOptions options;
  options.listen_address = "127.0.0.1:0";
  options.socket_buffer_bytes = buffer_bytes;
  options.tls = tls;
  ASSIGN_OR_RETURN(b.receiver, FramedKvReceiver::Create(b.dst.get(), options));
  FramedKvSenderOptions sender_options;
  sender_options.socket_buffer_bytes = buffer_bytes;
  sender_options.tls = tls;
  ASSIGN_OR_RETURN(b.sender, FramedKvSender::Create(sender_options));

  std::printf("KV plane: %s\n", tls != nullptr ? "mutual TLS (--kv_tls)" : "plain TCP");
  std::printf("layout %s, %lld B per layer-block, socket buffers %s\n",
              plan.layout.DebugString().c_str(),
              static_cast<long long>(plan.layout.bytes_per_layer_block()),
              buffer_bytes > 0 ? absl::StrCat(buffer_bytes, " B").c_str() : "autotuned");
  std::printf("%d transfers of %d tokens (%.2f MiB, %d frames of %.0f KiB) = %.0f MiB per round\n",
              plan.transfers, absl::GetFlag(FLAGS_prompt_tokens), transfer_bytes / 1048576.0,
              plan.layout.n_layers, plan.frame_bytes / 1024.0, plan.total_bytes() / 1048576.0);
  return absl::OkStatus();
}

template <typename F>
Timing Measure(F&& body) {
  const double cpu = CpuSeconds();
  const Clock::time_point start = Clock::now();
  body();
  return Timing{Seconds(Clock::now() - start), CpuSeconds() - cpu};
}

void Report(const char* what, const Timing& t, double bytes) {
  std::printf("%s %.2f GB/s, %.2f CPU-s/GB", what, bytes / t.wall / 1e9, t.cpu / (bytes / 1e9));
}

absl::Status Run() {
  Bench b;
  RETURN_IF_ERROR(Setup(b));
  const double bytes = static_cast<double>(b.plan.total_bytes());
  Timing best_transport, best_raw;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    const Timing raw = Measure([&] { StreamRawTcp(b.plan, b.raw_src, b.raw_dst); });
    absl::Status st;
    const Timing transport = Measure([&] {
      st = MoveThroughTransport(b.plan, *b.src, *b.dst, *b.receiver, *b.sender, &b.next_id);
    });
    RETURN_IF_ERROR(st);
    std::printf("round %d: ", r);
    Report("transport", transport, bytes);
    Report(" | raw tcp", raw, bytes);
    std::printf("\n");
    best_transport = {std::min(best_transport.wall, transport.wall),
                      std::min(best_transport.cpu, transport.cpu)};
    best_raw = {std::min(best_raw.wall, raw.wall), std::min(best_raw.cpu, raw.cpu)};
  }
  std::printf("best: ");
  Report("transport", best_transport, bytes);
  Report(" | raw tcp", best_raw, bytes);
  std::printf("\nratio (transport / raw): throughput %.2f, CPU per byte %.2f\n",
              best_raw.wall / best_transport.wall, best_transport.cpu / best_raw.cpu);
  std::printf("per %d-token transfer: %.3f ms\n", absl::GetFlag(FLAGS_prompt_tokens),
              best_transport.wall / b.plan.transfers * 1e3);
  return absl::OkStatus();
}

}  // namespace
}  // namespace pdserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  const absl::Status status = pdserve::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "pdserve_kv_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
