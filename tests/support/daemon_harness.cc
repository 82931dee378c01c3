#include "daemon_harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "wait_until.h"

namespace snowflake::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

[[noreturn]] void ThrowErrno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Each daemon gets its own notify socket, so datagrams of a killed predecessor that are
// still queued never count for its successor.
std::atomic<uint64_t> next_socket_number{0};

}  // namespace

bool NotifyMessage::HasLine(std::string_view line) const {
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (std::string_view(text).substr(at, end - at) == line) return true;
    at = end + 1;
  }
  return false;
}

std::optional<std::string> NotifyMessage::Value(std::string_view key) const {
  const std::string prefix = std::string(key) + "=";
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, prefix.size(), prefix) == 0) {
      return text.substr(at + prefix.size(), end - at - prefix.size());
    }
    at = end + 1;
  }
  return std::nullopt;
}

NotifySocket::NotifySocket(std::filesystem::path path) : path_(std::move(path)) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path_.string().size() >= sizeof(address.sun_path)) {
    throw std::system_error(ENAMETOOLONG, std::generic_category(),
                            "notify socket path too long: " + path_.string());
  }
  std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) ThrowErrno("socket");
  std::filesystem::remove(path_);
  if (bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    close(fd_);
    errno = error;
    ThrowErrno("bind " + path_.string());
  }
  thread_ = std::thread([this] { Receive(); });
}

NotifySocket::~NotifySocket() {
  stop_.store(true);
  thread_.join();
  close(fd_);
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void NotifySocket::Receive() {
  // Polls in short slices so destruction never waits long for the thread.
  std::vector<char> buffer(64 * 1024);
  while (!stop_.load()) {
    pollfd entry{fd_, POLLIN, 0};
    if (poll(&entry, 1, 20) <= 0) continue;
    const ssize_t size = recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (size < 0) continue;
    NotifyMessage message{Clock::now(), std::string(buffer.data(), static_cast<size_t>(size))};
    {
      std::lock_guard lock(mutex_);
      messages_.push_back(std::move(message));
    }
    arrived_.notify_all();
  }
}

std::vector<NotifyMessage> NotifySocket::Messages() const {
  std::lock_guard lock(mutex_);
  return messages_;
}

size_t NotifySocket::CountLine(std::string_view line) const {
  std::lock_guard lock(mutex_);
  size_t count = 0;
  for (const NotifyMessage& message : messages_) count += message.HasLine(line) ? 1 : 0;
  return count;
}

std::optional<size_t> NotifySocket::WaitFor(const std::function<bool(const NotifyMessage&)>& match,
                                            std::chrono::milliseconds timeout, size_t from) const {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(mutex_);
  size_t checked = from;
  for (;;) {
    for (; checked < messages_.size(); ++checked) {
      if (match(messages_[checked])) return checked;
    }
    if (arrived_.wait_until(lock, deadline) == std::cv_status::timeout &&
        checked == messages_.size()) {
      return std::nullopt;
    }
  }
}

std::optional<size_t> NotifySocket::WaitForLine(std::string_view line,
                                                std::chrono::milliseconds timeout,
                                                size_t from) const {
  const std::string wanted(line);
  return WaitFor([&](const NotifyMessage& message) { return message.HasLine(wanted); }, timeout,
                 from);
}

std::vector<std::string> NotifySocket::Statuses() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> statuses;
  for (const NotifyMessage& message : messages_) {
    if (auto status = message.Value("STATUS")) statuses.push_back(*status);
  }
  return statuses;
}

Daemon Daemon::Spawn(DaemonOptions options) {
  Daemon daemon;
  if (options.notify_socket.empty()) {
    options.notify_socket = options.runtime_dir.parent_path() /
                            ("notify-" + std::to_string(next_socket_number.fetch_add(1)));
  }
  daemon.notify_ = std::make_unique<NotifySocket>(options.notify_socket);

  std::vector<std::string> argv = {kSnowflakedPath,
                                   "--runtime-dir",
                                   options.runtime_dir.string(),
                                   "--state-dir",
                                   options.state_dir.string(),
                                   "--log-level",
                                   options.log_level};
  if (options.config_path) {
    argv.push_back("--config");
    argv.push_back(options.config_path->string());
  }
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());

  SpawnOptions spawn;
  spawn.env = options.env;
  // Not started by systemd: log to stderr, and only our socket and watchdog count.
  for (const char* name : {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM",
                           "INVOCATION_ID", "LISTEN_FDS", "LISTEN_PID"}) {
    spawn.env.unset.emplace_back(name);
  }
  spawn.env.set.emplace_back("NOTIFY_SOCKET", options.notify_socket.string());
  if (options.host_lock_dir.empty()) {
    options.host_lock_dir = options.runtime_dir.parent_path() / "host-locks";
  }
  spawn.env.set.emplace_back("SNOWFLAKE_HOST_LOCK_DIR", options.host_lock_dir.string());
  if (options.watchdog_usec) {
    spawn.env.set.emplace_back("WATCHDOG_USEC", std::to_string(options.watchdog_usec->count()));
  }
  if (options.faketime_file) {
    spawn.env.set.emplace_back("LD_PRELOAD", kFakeTimeLibrary);
    spawn.env.set.emplace_back("FAKETIME_TIMESTAMP_FILE", options.faketime_file->string());
    spawn.env.set.emplace_back("FAKETIME_NO_CACHE", "1");
    spawn.env.set.emplace_back("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    // ASan insists on being first in the library list and aborts otherwise; preloading
    // libasan before libfaketime deadlocks at start. libfaketime only wraps the clock
    // calls, so letting it come first is harmless. Other builds ignore ASAN_OPTIONS.
    const char* asan = std::getenv("ASAN_OPTIONS");
    std::string value = asan != nullptr && *asan != '\0' ? std::string(asan) + ":" : "";
    spawn.env.set.emplace_back("ASAN_OPTIONS", value + "verify_asan_link_order=0");
  }
  daemon.options_ = std::move(options);
  daemon.process_ = std::make_unique<Process>(Process::Spawn(std::move(argv), std::move(spawn)));
  return daemon;
}

Daemon::~Daemon() {
  if (process_ == nullptr) return;  // moved from
  if (process_->Running()) {
    process_->Kill(SIGKILL);
    process_->Wait(60s);
  }
  // A sanitizer finding in the daemon fails the test that ran it, even when the daemon
  // was SIGKILLed before it could exit with the sanitizer's status.
  const std::string err = process_->err();
  for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             "WARNING: ThreadSanitizer", "runtime error:"}) {
    if (err.find(report) != std::string::npos) {
      ADD_FAILURE() << "snowflaked (pid " << process_->pid() << ") reported \"" << report << "\":\n"
                    << err;
      break;
    }
  }
}

bool Daemon::WaitForReady(std::chrono::milliseconds timeout) {
  // Each look waits on the socket for up to 50 ms, then sees whether the daemon ended, so
  // a daemon that exits before READY=1 ends the wait at once. The verdict is ready().
  [[maybe_unused]] const auto ended = WaitUntil(
      [&] { return notify_->WaitForLine("READY=1", 50ms).has_value() || !process_->Running(); },
      timeout, "READY=1 or the daemon's exit", 0ms);
  return ready();
}

bool Daemon::ready() const { return notify_->CountLine("READY=1") > 0; }

pid_t Daemon::pid() const { return process_->pid(); }

bool Daemon::Running() { return process_->Running(); }

std::optional<ExitStatus> Daemon::Stop(std::chrono::milliseconds timeout) {
  process_->Kill(SIGTERM);
  auto status = process_->Wait(timeout);
  if (!status) {
    process_->Kill(SIGKILL);
    process_->Wait(60s);
  }
  return status;
}

ExitStatus Daemon::Kill() {
  process_->Kill(SIGKILL);
  return process_->Wait(60s).value_or(ExitStatus{});
}

std::optional<ExitStatus> Daemon::Wait(std::chrono::milliseconds timeout) {
  return process_->Wait(timeout);
}

std::string Daemon::Describe() {
  std::ostringstream text;
  text << "snowflaked pid " << process_->pid() << " (";
  if (auto status = process_->Wait(0ms)) {
    text << status->ToString();
  } else {
    text << "running";
  }
  text << "); notifications:";
  for (const NotifyMessage& message : notify_->Messages()) {
    std::string shown = message.text;
    for (char& c : shown) c = c == '\n' ? '|' : c;
    text << " [" << shown << "]";
  }
  std::string err = process_->err();
  constexpr size_t kTail = 4000;
  if (err.size() > kTail) err = "..." + err.substr(err.size() - kTail);
  text << "\nstderr:\n" << err;
  return text.str();
}

DaemonHarness::DaemonHarness(std::string_view name) : dir_(name) {
  std::filesystem::create_directories(runtime_dir());
  std::filesystem::create_directories(state_dir());
}

DaemonOptions DaemonHarness::Options() const {
  DaemonOptions options;
  options.runtime_dir = runtime_dir();
  options.state_dir = state_dir();
  return options;
}

DaemonOptions DaemonHarness::NamedOptions(std::string_view name, std::string_view toml,
                                          Host host) const {
  const std::string base(name);
  DaemonOptions options;
  options.runtime_dir = root() / (base + "-run");
  options.state_dir = root() / (base + "-state");
  if (host == Host::kOwn) options.host_lock_dir = root() / (base + "-host-locks");
  options.config_path = WriteFile(base + ".toml", toml);
  return options;
}

std::filesystem::path DaemonHarness::WriteFile(std::string_view name, std::string_view text) const {
  const std::filesystem::path path = dir_ / name;
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) ADD_FAILURE() << "cannot write " << path;
  return path;
}

Daemon DaemonHarness::Start(DaemonOptions options, std::chrono::milliseconds timeout) const {
  Daemon daemon = Daemon::Spawn(std::move(options));
  if (!daemon.WaitForReady(timeout)) {
    ADD_FAILURE() << "snowflaked sent no READY=1 within " << timeout.count()
                  << " ms: " << daemon.Describe();
  }
  return daemon;
}

ClientOptions DaemonHarness::ClientOptionsFor(const std::filesystem::path& runtime_dir) {
  ClientOptions options;
  options.runtime_dir = runtime_dir;
  options.wait_timeout = 10s;
  options.max_heartbeat_age = 5s;
  return options;
}

std::optional<ClientStatus> WaitForState(const std::filesystem::path& runtime_dir,
                                         std::string_view state,
                                         std::chrono::milliseconds timeout) {
  ClientOptions options = DaemonHarness::ClientOptionsFor(runtime_dir);
  std::optional<ClientStatus> last;  // the last status read, when a later read fails
  return AttemptUntil(
      [&] {
        if (auto status = Client::Inspect(options)) last = *status;
        return last;
      },
      [&](const std::optional<ClientStatus>& seen) { return seen && seen->state == state; },
      timeout, 1ms);
}

void SetClockOffset(const std::filesystem::path& file, std::string_view offset) {
  // libfaketime rereads the file on every clock read (FAKETIME_NO_CACHE): a rename makes
  // the change atomic, so no read sees a half-written offset.
  const std::filesystem::path temporary = file.string() + ".new";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << offset << "\n";
    out.close();
    if (!out) ADD_FAILURE() << "cannot write " << temporary;
  }
  std::filesystem::rename(temporary, file);
}

}  // namespace snowflake::testing
