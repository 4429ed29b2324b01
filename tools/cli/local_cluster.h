// LocalCluster: starts pdserve-router, N pdserve-prefill and M
// pdserve-decode processes on loopback (the `pdserve up` command and the
// integration tests), and stops them (SIGTERM, then SIGKILL) on
// destruction. Each process logs to <log_dir>/<name>.log. `pdserve up`
// also supervises them: Supervise() restarts a process that died, with a
// back-off, as a Kubernetes Deployment would restart its pod.
//
// Ports: every process binds port 0 (the kernel picks) and reports what it
// bound in <log_dir>/<name>.port (--port_file, common/rpc/port_file.h);
// the workers start first, and the router is given the addresses they
// reported. Nothing picks a "free" port ahead of the bind, so clusters
// started side by side (parallel tests) cannot take each other's ports. A
// restarted process binds the ports it reported the first time (the router
// knows it by them).
//
// Not thread-safe: one thread starts, supervises and stops the cluster.
#ifndef PDSERVE_TOOLS_CLI_LOCAL_CLUSTER_H_
#define PDSERVE_TOOLS_CLI_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdserve {

struct LocalClusterOptions {
  std::string bin_dir;  // where pdserve-{router,prefill,decode} live
  std::string model;
  std::string prefill_model;  // empty = `model` (tests use another file here)
  std::string log_dir;
  int prefill = 1;
  int decode = 1;
  bool colocated = false;  // no prefill workers; decode prefills locally
  int router_port = 0;     // 0 = any free port (router_address() says which)
  // The router's OpenAI-compatible HTTP API (--http_listen): port 0 = any
  // free port (http_address() says which); "none" = off.
  std::string router_http_listen = "127.0.0.1:0";
  int threads_per_worker = 1;
  int kv_blocks = 1024;
  std::vector<std::string> extra_router_flags;
  std::vector<std::string> extra_worker_flags;
  // Appended after extra_worker_flags, to one tier only.
  std::vector<std::string> extra_prefill_flags;
  std::vector<std::string> extra_decode_flags;
  // Appended last, to the one process so named ("decode-1"): e.g. a KV
  // endpoint of its own for a test's fault-injecting relay.
  std::map<std::string, std::vector<std::string>> extra_process_flags;
  // Longest wait for every process to report its ports (model load and
  // warm-up included; sanitizer builds are several times slower).
  absl::Duration start_timeout = absl::Seconds(180);
};

struct ClusterProcess {
  std::string name;
  pid_t pid = -1;
  int port = 0;          // gRPC, as bound
  int metrics_port = 0;  // 0 = no metrics server
  int http_port = 0;     // the router's HTTP API; 0 = none
  std::vector<std::string> args;
  // Supervision (Supervise()): when it last started, when an exited one is
  // due to start again, and the back-off that got it there.
  absl::Time started = absl::InfinitePast();
  absl::Time restart_at = absl::InfiniteFuture();
  absl::Duration backoff = absl::ZeroDuration();
  int restarts = 0;
};

class LocalCluster {
 public:
  // Returns once every process serves and has reported its ports (bounded
  // by options.start_timeout); fails naming a process that exited first.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();

  std::string router_address() const;
  // "127.0.0.1:<port>" of the router's HTTP API; "" without one.
  std::string http_address() const;
  // host:port of every process whose name starts with `prefix`.
  std::vector<std::string> addresses(const std::string& prefix) const;
  // The bound /metrics port of process `name`; 0 if it has none (or no such
  // process). Pass --metrics_port=-1 in the extra flags to get one.
  int metrics_port(const std::string& name) const;
  const std::vector<ClusterProcess>& processes() const { return processes_; }
  // Where process `name` logs.
  std::string log_path(const std::string& name) const;
  // Sends `sig` to one process (fault injection in tests).
  void Signal(const std::string& name, int sig);
  // SIGKILLs one process and reaps it (fault injection); no-op if it is
  // not running.
  void Kill(const std::string& name);
  // Starts a killed process again with its original arguments (same port;
  // its log is appended to). No-op if it is running.
  absl::Status Restart(const std::string& name);
  // SIGTERM everything, wait up to kStopGrace, SIGKILL leftovers. Idempotent.
  void Stop();
  // Workers started by `pdserve up` drain within kWorkerDrain, inside it.
  static constexpr absl::Duration kStopGrace = absl::Seconds(10);
  static constexpr absl::Duration kWorkerDrain = absl::Seconds(8);
  // FAILED_PRECONDITION naming the first process that has exited, with the
  // last lines of its log (a refused model says why there); OK otherwise.
  // Reaps what it finds.
  absl::Status CheckAlive();
  // Reaps processes that exited and starts each again once its back-off
  // has passed: 1 s, doubling to kMaxRestartBackoff while it keeps dying
  // within kStableRun of its start (so a process that cannot start is not
  // restarted in a tight loop), back to 1 s after a stable run. Returns a
  // line per event (an exit with its log tail, a restart) for the operator.
  std::vector<std::string> Supervise(absl::Time now);
  static constexpr absl::Duration kMaxRestartBackoff = absl::Seconds(30);
  static constexpr absl::Duration kStableRun = absl::Seconds(60);

 private:
  LocalCluster() = default;
  absl::Status Spawn(ClusterProcess& p, bool append_log);
  std::string PortFile(const ClusterProcess& p) const;
  // Waits until every started process without ports yet (port == 0) has
  // written its port file, then records the ports and pins them in its
  // arguments (for restarts). Fails when one exits first or `deadline`
  // passes.
  absl::Status AwaitPorts(absl::Time deadline);
  // Reaps `p` if it has exited: how it ended and its log's last lines.
  std::optional<std::string> ReapExited(ClusterProcess& p);

  std::string log_dir_;
  std::vector<ClusterProcess> processes_;
};

// Directory of the running executable.
std::string SelfDir();

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_LOCAL_CLUSTER_H_
