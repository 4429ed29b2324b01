// A TCP relay for fault injection in tests: listens on 127.0.0.1 (any free
// port) and relays every connection to a target; CutAll() shuts down every
// connection it carries at once, in both directions, as a partition or a
// dropped NAT entry would cut a link mid-transfer. The chaos test puts one
// in front of each decode worker's KV receiver (--kv_advertise) so that KV
// transfers and migration pushes break half way.
#ifndef PDSERVE_TESTS_TESTING_TCP_CUT_PROXY_H_
#define PDSERVE_TESTS_TESTING_TCP_CUT_PROXY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace pdserve::testing {

// A free loopback port (bound, then released): for a process that must
// listen where a proxy points before it starts. Racy in principle, as any
// such probe; the port is used within milliseconds.
inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

class TcpCutProxy {
 public:
  // Relays to 127.0.0.1:`target_port`.
  explicit TcpCutProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a = Loopback(0);
    socklen_t len = sizeof(a);
    CHECK_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    CHECK_EQ(listen(listen_fd_, 64), 0);
    CHECK_EQ(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    accepter_ = std::thread([this] { AcceptLoop(); });
  }

  ~TcpCutProxy() {
    stop_.store(true);
    accepter_.join();
    CutAll();
    std::vector<std::thread> pumps;
    {
      absl::MutexLock lock(&mu_);
      pumps.swap(pumps_);
    }
    for (std::thread& t : pumps) t.join();
    close(listen_fd_);
  }

  TcpCutProxy(const TcpCutProxy&) = delete;
  TcpCutProxy& operator=(const TcpCutProxy&) = delete;

  int port() const { return port_; }

  // Shuts down every live relayed connection; returns how many it cut.
  int CutAll() {
    absl::MutexLock lock(&mu_);
    int cut = 0;
    for (const std::weak_ptr<Link>& w : links_) {
      if (std::shared_ptr<Link> l = w.lock(); l != nullptr && !l->done.load()) {
        shutdown(l->client, SHUT_RDWR);
        shutdown(l->server, SHUT_RDWR);
        ++cut;
      }
    }
    links_.clear();
    return cut;
  }

 private:
  // One relayed connection; the descriptors close when both pumps let go.
  struct Link {
    int client = -1;
    int server = -1;
    std::atomic<bool> done{false};
    ~Link() {
      close(client);
      close(server);
    }
  };

  static sockaddr_in Loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }

  void AcceptLoop() {
    while (!stop_.load()) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      auto link = std::make_shared<Link>();
      link->client = client;
      link->server = socket(AF_INET, SOCK_STREAM, 0);
      const sockaddr_in target = Loopback(target_port_);
      if (connect(link->server, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
        continue;  // the target is down: the client sees its connection close
      }
      absl::MutexLock lock(&mu_);
      std::erase_if(links_, [](const std::weak_ptr<Link>& w) { return w.expired(); });
      links_.push_back(link);
      pumps_.emplace_back([link] { Pump(*link, link->client, link->server); });
      pumps_.emplace_back([link] { Pump(*link, link->server, link->client); });
    }
  }

  // Copies `from` to `to` until either end closes or is cut, then closes
  // the link both ways (a half-open relay would hide the cut).
  static void Pump(Link& link, int from, int to) {
    char buf[16384];
    while (true) {
      const ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) break;
      ssize_t off = 0;
      while (off < n) {
        const ssize_t w = send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w <= 0) break;
        off += w;
      }
      if (off < n) break;
    }
    link.done.store(true);
    shutdown(link.client, SHUT_RDWR);
    shutdown(link.server, SHUT_RDWR);
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accepter_;
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_TCP_CUT_PROXY_H_
