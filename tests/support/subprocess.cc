#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

extern char** environ;

namespace snowflake::testing {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void ThrowErrno(int error, const std::string& what) {
  throw std::system_error(error, std::generic_category(), what);
}

// A file descriptor closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read;
  Fd write;
};

Pipe MakePipe() {
  int fds[2];
  // O_CLOEXEC: no other child (spawned by another thread) may inherit our ends; the
  // dup2() in the file actions gives the child its copy without the flag.
  if (::pipe2(fds, O_CLOEXEC) != 0) ThrowErrno(errno, "pipe2");
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

std::vector<std::string> BuildEnvironment(const EnvChanges& changes) {
  auto removed = [&](std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    for (const auto& unset : changes.unset) {
      if (name == unset) return true;
    }
    for (const auto& [key, value] : changes.set) {
      if (name == key) return true;
    }
    return false;
  };
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!removed(*entry)) env.emplace_back(*entry);
  }
  for (const auto& [key, value] : changes.set) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

ExitStatus FromWaitStatus(int wstatus) {
  ExitStatus status;
  if (WIFEXITED(wstatus)) {
    status.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    status.term_signal = WTERMSIG(wstatus);
  }
  return status;
}

}  // namespace

std::string ExitStatus::ToString() const {
  if (exited()) return "exit " + std::to_string(exit_code);
  return "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
}

struct Process::State {
  pid_t pid = -1;
  std::optional<ExitStatus> status;

  // The I/O thread's fds: it alone reads, writes and closes them while it runs.
  Fd stdin_write;
  std::string stdin_text;
  Fd out_read;
  Fd err_read;
  std::thread io_thread;
  std::atomic<bool> stop{false};

  mutable std::mutex mu;
  std::condition_variable changed;
  std::string out;        // guarded by mu
  std::string err;        // guarded by mu
  bool out_open = false;  // guarded by mu: still reading the stream
  bool err_open = false;  // guarded by mu

  ~State() {
    if (pid > 0 && !status) {
      ::kill(pid, SIGKILL);
      int wstatus = 0;
      while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
    }
    StopIo();
  }

  void StopIo() {
    stop.store(true);
    if (io_thread.joinable()) io_thread.join();
  }

  void IoLoop() {
    // A child that exits without reading its stdin must give us EPIPE, not kill the test
    // with SIGPIPE. Blocked here only: the signal is per-thread for a failed write.
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);

    size_t written = 0;
    if (stdin_write && stdin_text.empty()) stdin_write.Reset();
    while (!stop.load()) {
      pollfd fds[3];
      int count = 0;
      int out_index = -1, err_index = -1, in_index = -1;
      if (out_read) {
        out_index = count;
        fds[count++] = {out_read.get(), POLLIN, 0};
      }
      if (err_read) {
        err_index = count;
        fds[count++] = {err_read.get(), POLLIN, 0};
      }
      if (stdin_write) {
        in_index = count;
        fds[count++] = {stdin_write.get(), POLLOUT, 0};
      }
      if (count == 0) return;
      // A bounded wait so that StopIo() is noticed even if a grandchild keeps a pipe open.
      const int ready = ::poll(fds, count, 50);
      if (ready < 0 && errno != EINTR) return;
      if (ready <= 0) continue;
      if (in_index >= 0 && fds[in_index].revents != 0) {
        const ssize_t n =
            ::write(stdin_write.get(), stdin_text.data() + written, stdin_text.size() - written);
        if (n > 0) written += static_cast<size_t>(n);
        if ((n < 0 && errno != EINTR && errno != EAGAIN) || written == stdin_text.size()) {
          stdin_write.Reset();  // EOF for the child
        }
      }
      ReadInto(out_index >= 0 ? fds[out_index].revents : 0, out_read, &State::out,
               &State::out_open);
      ReadInto(err_index >= 0 ? fds[err_index].revents : 0, err_read, &State::err,
               &State::err_open);
    }
  }

  void ReadInto(short revents, Fd& fd, std::string State::*buffer, bool State::*open) {
    if (revents == 0) return;
    char chunk[4096];
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) return;
    std::lock_guard lock(mu);
    if (n > 0) {
      (this->*buffer).append(chunk, static_cast<size_t>(n));
    } else {
      fd.Reset();  // EOF (or an error): every writer has closed its copy
      this->*open = false;
    }
    changed.notify_all();
  }

  // Waits until both captured streams are closed or the deadline passes.
  void WaitForStreamsClosed(Clock::time_point deadline) {
    std::unique_lock lock(mu);
    changed.wait_until(lock, deadline, [&] { return !out_open && !err_open; });
  }
};

namespace {

void AddRedirect(posix_spawn_file_actions_t* actions, int target_fd, const Output& output,
                 Pipe* pipe) {
  int rc = 0;
  switch (output.kind) {
    case Output::Kind::kCapture:
      *pipe = MakePipe();
      rc = posix_spawn_file_actions_adddup2(actions, pipe->write.get(), target_fd);
      break;
    case Output::Kind::kFile:
      rc = posix_spawn_file_actions_addopen(actions, target_fd, output.path.c_str(),
                                            O_WRONLY | O_CREAT | O_TRUNC, 0644);
      break;
    case Output::Kind::kNull:
      rc = posix_spawn_file_actions_addopen(actions, target_fd, "/dev/null", O_WRONLY, 0);
      break;
    case Output::Kind::kInherit:
      break;
  }
  if (rc != 0) ThrowErrno(rc, "posix_spawn_file_actions");
}

// Starts the child; returns the state with pipes and the I/O thread running.
std::unique_ptr<Process::State> SpawnChild(std::vector<std::string> argv, const EnvChanges& env,
                                           const Output& out, const Output& err,
                                           const std::string* stdin_text,  // null: /dev/null
                                           const std::optional<std::filesystem::path>& cwd) {
  if (argv.empty()) throw std::invalid_argument("Spawn: argv is empty");
  auto state = std::make_unique<Process::State>();

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  struct Cleanup {
    posix_spawn_file_actions_t* actions;
    posix_spawnattr_t* attr;
    ~Cleanup() {
      posix_spawn_file_actions_destroy(actions);
      posix_spawnattr_destroy(attr);
    }
  } cleanup{&actions, &attr};

  Pipe in_pipe, out_pipe, err_pipe;
  if (stdin_text) {
    in_pipe = MakePipe();
    posix_spawn_file_actions_adddup2(&actions, in_pipe.read.get(), STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  AddRedirect(&actions, STDOUT_FILENO, out, &out_pipe);
  AddRedirect(&actions, STDERR_FILENO, err, &err_pipe);
  if (cwd) {
    const int rc = posix_spawn_file_actions_addchdir_np(&actions, cwd->c_str());
    if (rc != 0) ThrowErrno(rc, "posix_spawn_file_actions_addchdir_np");
  }

  // A test runner (or a test that uses signalfd) may block or ignore signals; the child
  // must start as a fresh process would, or SIGTERM tests would hang.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2,
                  SIGTSTP, SIGTTIN, SIGTTOU}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> env_strings = BuildEnvironment(env);
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env_strings);
  const bool search_path = argv[0].find('/') == std::string::npos;
  pid_t pid = -1;
  const int rc = search_path
                     ? posix_spawnp(&pid, c_argv[0], &actions, &attr, c_argv.data(), c_env.data())
                     : posix_spawn(&pid, c_argv[0], &actions, &attr, c_argv.data(), c_env.data());
  if (rc != 0) ThrowErrno(rc, "posix_spawn " + argv[0]);
  state->pid = pid;

  // The child holds its own copies now; ours of the child's ends must go, or EOF never
  // comes.
  in_pipe.read.Reset();
  out_pipe.write.Reset();
  err_pipe.write.Reset();
  if (stdin_text) {
    state->stdin_write = std::move(in_pipe.write);
    state->stdin_text = *stdin_text;
  }
  state->out_read = std::move(out_pipe.read);
  state->err_read = std::move(err_pipe.read);
  state->out_open = static_cast<bool>(state->out_read);
  state->err_open = static_cast<bool>(state->err_read);
  if (state->stdin_write || state->out_read || state->err_read) {
    Process::State* raw = state.get();
    state->io_thread = std::thread([raw] { raw->IoLoop(); });
  }
  return state;
}

}  // namespace

Process::Process(std::unique_ptr<State> state) : state_(std::move(state)) {}
Process::Process(Process&&) noexcept = default;
Process& Process::operator=(Process&&) noexcept = default;
Process::~Process() = default;

Process Process::Spawn(std::vector<std::string> argv, SpawnOptions options) {
  return Process(SpawnChild(std::move(argv), options.env, options.out, options.err, nullptr,
                            options.working_dir));
}

pid_t Process::pid() const { return state_->pid; }

bool Process::Kill(int sig) {
  if (state_->status) return false;
  return ::kill(state_->pid, sig) == 0;
}

std::optional<ExitStatus> Process::Wait(std::chrono::milliseconds timeout) {
  if (state_->status) return state_->status;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int wstatus = 0;
    const pid_t reaped = ::waitpid(state_->pid, &wstatus, WNOHANG);
    if (reaped == state_->pid) {
      state_->status = FromWaitStatus(wstatus);
      return state_->status;
    }
    if (reaped < 0 && errno != EINTR) ThrowErrno(errno, "waitpid");
    if (Clock::now() >= deadline) return std::nullopt;
    // Polling keeps this free of SIGCHLD handlers, which would disturb the code under
    // test; 1 ms is far below anything a test waits for.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool Process::Running() { return !Wait(std::chrono::milliseconds(0)).has_value(); }

std::string Process::out() const {
  std::lock_guard lock(state_->mu);
  return state_->out;
}

std::string Process::err() const {
  std::lock_guard lock(state_->mu);
  return state_->err;
}

bool Process::WaitForOutput(Stream stream, std::string_view needle,
                            std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mu);
  const std::string& buffer = stream == Stream::kOut ? state_->out : state_->err;
  const bool& open = stream == Stream::kOut ? state_->out_open : state_->err_open;
  state_->changed.wait_for(lock, timeout,
                           [&] { return buffer.find(needle) != std::string::npos || !open; });
  return buffer.find(needle) != std::string::npos;
}

RunResult RunCommand(std::vector<std::string> argv, RunOptions options) {
  const auto deadline = Clock::now() + options.timeout;
  Process child(SpawnChild(std::move(argv), options.env, Output::Capture(), Output::Capture(),
                           &options.stdin_text, options.working_dir));
  RunResult result;
  auto status = child.Wait(options.timeout);
  if (!status) {
    result.timed_out = true;
    child.Kill(SIGKILL);
    status = child.Wait(std::chrono::milliseconds(10'000));
  }
  // The child is gone; its output may still be in the pipes (or held open by a
  // grandchild, which gets until the deadline, at least 1 s).
  child.state_->WaitForStreamsClosed(std::max(deadline, Clock::now() + std::chrono::seconds(1)));
  child.state_->StopIo();
  result.status = status.value_or(ExitStatus{});
  result.out = child.out();
  result.err = child.err();
  return result;
}

}  // namespace snowflake::testing
