#include "tools/cli/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/rpc/port_file.h"
#include "glog/logging.h"

namespace pdserve {

std::string SelfDir() {
  return std::filesystem::canonical("/proc/self/exe").parent_path().string();
}

absl::Status LocalCluster::Spawn(ClusterProcess& p, bool append_log) {
  const std::string log = absl::StrCat(log_dir_, "/", p.name, ".log");
  std::vector<char*> argv;
  for (std::string& a : p.args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Child: own process group is not needed; log to a file, unblock signals.
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | (append_log ? O_APPEND : O_TRUNC), 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    // If `pdserve up` (or a test) dies without stopping us, drain and exit
    // instead of lingering on the ports.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    execv(argv[0], argv.data());
    _exit(127);
  }
  p.pid = pid;
  p.started = absl::Now();
  LOG(INFO) << "started " << p.name << " (pid " << pid << "): " << absl::StrJoin(p.args, " ");
  return absl::OkStatus();
}

std::string LocalCluster::PortFile(const ClusterProcess& p) const {
  return absl::StrCat(log_dir_, "/", p.name, ".port");
}

namespace {

// Replaces the value of every `--<flag>=` argument with `value`.
// --flag=host:0 becomes --flag=host:<port>, so a restart binds the same
// port.
void PinPort(std::vector<std::string>& args, const std::string& flag, int port) {
  const std::string prefix = absl::StrCat("--", flag, "=");
  for (std::string& a : args) {
    if (a.rfind(prefix, 0) != 0) continue;
    const size_t colon = a.rfind(':');
    if (colon != std::string::npos && colon >= prefix.size()) {
      a = absl::StrCat(a.substr(0, colon + 1), port);
    }
  }
}

void PinFlag(std::vector<std::string>& args, const std::string& flag, const std::string& value) {
  const std::string prefix = absl::StrCat("--", flag, "=");
  for (std::string& a : args) {
    if (a.rfind(prefix, 0) == 0) a = prefix + value;
  }
}

}  // namespace

absl::Status LocalCluster::AwaitPorts(absl::Time deadline) {
  std::vector<ClusterProcess*> pending;
  for (ClusterProcess& p : processes_) {
    if (p.pid > 0 && p.port == 0) pending.push_back(&p);
  }
  while (!pending.empty()) {
    for (auto it = pending.begin(); it != pending.end();) {
      ClusterProcess& p = **it;
      absl::StatusOr<BoundPorts> ports = ReadPortFile(PortFile(p));
      if (ports.ok()) {
        p.port = ports->grpc;
        p.metrics_port = ports->metrics;
        PinFlag(p.args, "listen", absl::StrCat("127.0.0.1:", p.port));
        if (p.metrics_port != 0) PinFlag(p.args, "metrics_port", absl::StrCat(p.metrics_port));
        p.http_port = ports->http;
        if (p.http_port != 0) PinPort(p.args, "http_listen", p.http_port);
        it = pending.erase(it);
        continue;
      }
      if (!absl::IsNotFound(ports.status())) return ports.status();
      if (std::optional<std::string> exit = ReapExited(p)) {
        return absl::FailedPreconditionError(*exit);
      }
      ++it;
    }
    if (pending.empty()) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(pending.front()->name, " did not report its ports (",
                       PortFile(*pending.front()), ") in time; see its log"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(const LocalClusterOptions& o) {
  std::unique_ptr<LocalCluster> c(new LocalCluster);
  std::filesystem::create_directories(o.log_dir);
  c->log_dir_ = o.log_dir;
  const absl::Time deadline = absl::Now() + o.start_timeout;
  const std::string threads = absl::StrCat("--threads=", o.threads_per_worker);
  const std::string blocks = absl::StrCat("--kv_blocks=", o.kv_blocks);
  auto add = [&](const std::string& name, std::vector<std::string> args) {
    ClusterProcess p{.name = name, .args = std::move(args)};
    p.args.push_back("--port_file=" + c->PortFile(p));
    std::filesystem::remove(c->PortFile(p));  // one left by an earlier run
    c->processes_.push_back(std::move(p));
  };
  auto add_worker = [&](const std::string& kind, int i) {
    const std::string name = absl::StrCat(kind, "-", i);
    const std::string model =
        kind == "prefill" && !o.prefill_model.empty() ? o.prefill_model : o.model;
    std::vector<std::string> args = {absl::StrCat(o.bin_dir, "/pdserve-", kind),
                                     "--model=" + model,
                                     "--listen=127.0.0.1:0",
                                     threads,
                                     blocks,
                                     "--worker_id=" + name};
    if (kind == "decode") args.push_back("--kv_listen=127.0.0.1:0");
    args.insert(args.end(), o.extra_worker_flags.begin(), o.extra_worker_flags.end());
    const std::vector<std::string>& tier =
        kind == "prefill" ? o.extra_prefill_flags : o.extra_decode_flags;
    args.insert(args.end(), tier.begin(), tier.end());
    if (auto own = o.extra_process_flags.find(name); own != o.extra_process_flags.end()) {
      args.insert(args.end(), own->second.begin(), own->second.end());
    }
    add(name, std::move(args));
  };
  for (int i = 0; i < (o.colocated ? 0 : o.prefill); ++i) add_worker("prefill", i);
  for (int i = 0; i < o.decode; ++i) add_worker("decode", i);
  for (ClusterProcess& p : c->processes_) RETURN_IF_ERROR(c->Spawn(p, /*append_log=*/false));
  RETURN_IF_ERROR(c->AwaitPorts(deadline));

  std::vector<std::string> router_args = {
      absl::StrCat(o.bin_dir, "/pdserve-router"), "--model=" + o.model,
      absl::StrCat("--listen=127.0.0.1:", o.router_port), "--http_listen=" + o.router_http_listen,
      "--decode=" + absl::StrJoin(c->addresses("decode"), ","),
      "--prefill=" + absl::StrJoin(c->addresses("prefill"), ",")};
  if (o.colocated) router_args.push_back("--colocated");
  router_args.insert(router_args.end(), o.extra_router_flags.begin(), o.extra_router_flags.end());
  add("router", std::move(router_args));
  RETURN_IF_ERROR(c->Spawn(c->processes_.back(), /*append_log=*/false));
  RETURN_IF_ERROR(c->AwaitPorts(deadline));
  return c;
}

std::string LocalCluster::router_address() const {
  const std::vector<std::string> router = addresses("router");
  return router.empty() ? "" : router.front();
}

std::string LocalCluster::http_address() const {
  for (const ClusterProcess& p : processes_) {
    if (p.name == "router" && p.http_port != 0) return absl::StrCat("127.0.0.1:", p.http_port);
  }
  return "";
}

std::string LocalCluster::log_path(const std::string& name) const {
  return absl::StrCat(log_dir_, "/", name, ".log");
}

std::vector<std::string> LocalCluster::addresses(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const ClusterProcess& p : processes_) {
    if (p.name.rfind(prefix, 0) == 0) out.push_back(absl::StrCat("127.0.0.1:", p.port));
  }
  return out;
}

int LocalCluster::metrics_port(const std::string& name) const {
  for (const ClusterProcess& p : processes_) {
    if (p.name == name) return p.metrics_port;
  }
  return 0;
}

void LocalCluster::Signal(const std::string& name, int sig) {
  for (const ClusterProcess& p : processes_) {
    if (p.name == name && p.pid > 0) kill(p.pid, sig);
  }
}

void LocalCluster::Kill(const std::string& name) {
  for (ClusterProcess& p : processes_) {
    if (p.name != name || p.pid <= 0) continue;
    kill(p.pid, SIGKILL);
    int status = 0;
    waitpid(p.pid, &status, 0);
    p.pid = -1;
  }
}

absl::Status LocalCluster::Restart(const std::string& name) {
  for (ClusterProcess& p : processes_) {
    if (p.name == name && p.pid <= 0) return Spawn(p, /*append_log=*/true);
  }
  return absl::OkStatus();
}

void LocalCluster::Stop() {
  for (ClusterProcess& p : processes_) {
    if (p.pid <= 0) continue;
    kill(p.pid, SIGTERM);
    kill(p.pid, SIGCONT);  // a stopped (fault-injected) process handles it too
  }
  const absl::Time deadline = absl::Now() + kStopGrace;
  for (ClusterProcess& p : processes_) {
    while (p.pid > 0) {
      int status = 0;
      const pid_t r = waitpid(p.pid, &status, WNOHANG);
      if (r == p.pid || r < 0) {
        p.pid = -1;
        break;
      }
      if (absl::Now() > deadline) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, &status, 0);
        p.pid = -1;
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
}

namespace {

// The last `n` non-empty lines of a file, joined with newlines.
std::string LogTail(const std::string& path, size_t n) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  const size_t from = lines.size() > n ? lines.size() - n : 0;
  return absl::StrJoin(lines.begin() + from, lines.end(), "\n");
}

}  // namespace

std::optional<std::string> LocalCluster::ReapExited(ClusterProcess& p) {
  if (p.pid <= 0) return std::nullopt;
  int status = 0;
  if (waitpid(p.pid, &status, WNOHANG) != p.pid) return std::nullopt;
  p.pid = -1;
  const std::string log = absl::StrCat(log_dir_, "/", p.name, ".log");
  return absl::StrCat(p.name, " exited (", WIFEXITED(status) ? "status " : "signal ",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), "); ", log,
                      " ends:\n", LogTail(log, 4));
}

absl::Status LocalCluster::CheckAlive() {
  for (ClusterProcess& p : processes_) {
    if (std::optional<std::string> exit = ReapExited(p)) {
      return absl::FailedPreconditionError(*exit);
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> LocalCluster::Supervise(absl::Time now) {
  std::vector<std::string> events;
  for (ClusterProcess& p : processes_) {
    if (std::optional<std::string> exit = ReapExited(p)) {
      const bool stable = now - p.started >= kStableRun;
      p.backoff = stable || p.backoff == absl::ZeroDuration()
                      ? absl::Seconds(1)
                      : std::min(p.backoff * 2, kMaxRestartBackoff);
      p.restart_at = now + p.backoff;
      events.push_back(
          absl::StrCat(*exit, "\nrestarting ", p.name, " in ", absl::FormatDuration(p.backoff)));
    }
    if (p.pid > 0 || now < p.restart_at) continue;
    p.restart_at = absl::InfiniteFuture();
    if (absl::Status s = Spawn(p, /*append_log=*/true); !s.ok()) {
      p.restart_at = now + p.backoff;
      events.push_back(absl::StrCat("cannot restart ", p.name, ": ", s.ToString()));
      continue;
    }
    ++p.restarts;
    events.push_back(
        absl::StrCat("restarted ", p.name, " (pid ", p.pid, ", restart ", p.restarts, ")"));
  }
  return events;
}

LocalCluster::~LocalCluster() { Stop(); }

}  // namespace pdserve
