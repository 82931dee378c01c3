// Running real processes from tests: RunCommand() for a command that finishes (capture its
// stdout, stderr and exit status), Process for a long-running child (a daemon) that the
// test talks to, signals and waits for.
//
// Children are started with posix_spawn (no shell: argv is passed as is), an empty signal
// mask and default signal dispositions, stdin from /dev/null unless text is given, and
// the parent's environment plus RunOptions/SpawnOptions changes. argv[0] is looked up in
// PATH if it contains no '/'.
//
// Failures to start (no such binary, no pipes) throw std::system_error: in a test that is
// a setup failure, not a result to inspect.

#ifndef SNOWFLAKE_TESTS_SUPPORT_SUBPROCESS_H_
#define SNOWFLAKE_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace snowflake::testing {

// How a child ended.
struct ExitStatus {
  int exit_code = -1;   // the status passed to exit(), or -1 if killed by a signal
  int term_signal = 0;  // the signal that killed it, or 0 if it exited

  bool exited() const { return term_signal == 0; }
  bool ExitedWith(int code) const { return exited() && exit_code == code; }
  // "exit 2" or "killed by signal 9 (Killed)", for assertion messages.
  std::string ToString() const;
};

struct EnvChanges {
  // Set (or override) these variables in the child.
  std::vector<std::pair<std::string, std::string>> set;
  // Remove these variables from the child's environment (applied before `set`).
  std::vector<std::string> unset;
};

struct RunOptions {
  EnvChanges env;
  std::string stdin_text;  // written to the child's stdin, which is then closed
  // The child is killed with SIGKILL if it has not finished by then.
  std::chrono::milliseconds timeout{30'000};
  std::optional<std::filesystem::path> working_dir;
};

struct RunResult {
  ExitStatus status;
  bool timed_out = false;  // the timeout expired and the child was killed
  std::string out;         // everything written to stdout
  std::string err;         // everything written to stderr
};

// Runs argv to completion (or the timeout) and returns what it printed and how it ended.
// Not thread-safe with respect to the process environment: do not setenv() concurrently.
RunResult RunCommand(std::vector<std::string> argv, RunOptions options = {});

// Where a long-running child's stdout or stderr goes.
struct Output {
  enum class Kind { kCapture, kFile, kNull, kInherit };
  Kind kind = Kind::kCapture;
  std::filesystem::path path;  // for kFile: created or truncated

  static Output Capture() { return {Kind::kCapture, {}}; }
  static Output File(std::filesystem::path path) { return {Kind::kFile, std::move(path)}; }
  static Output Null() { return {Kind::kNull, {}}; }
  static Output Inherit() { return {Kind::kInherit, {}}; }
};

struct SpawnOptions {
  EnvChanges env;
  Output out = Output::Capture();
  Output err = Output::Capture();
  std::optional<std::filesystem::path> working_dir;
};

// A child process owned by the test. Destroying a Process that is still running kills it
// with SIGKILL and reaps it, so a failing test never leaks children.
//
// Thread-safety: out(), err() and WaitForOutput() may be called from any thread while
// another calls the other methods; everything else must be called from one thread at a
// time. Captured output is collected by a background thread so a chatty child never
// blocks on a full pipe.
class Process {
 public:
  enum class Stream { kOut, kErr };

  // Starts argv. Throws std::system_error if it cannot be started.
  static Process Spawn(std::vector<std::string> argv, SpawnOptions options = {});

  Process(Process&&) noexcept;
  Process& operator=(Process&&) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const;

  // Sends sig to the child unless it has already been reaped. Returns false if the
  // signal could not be sent (the child was reaped already).
  bool Kill(int sig);

  // Waits up to `timeout` for the child to end and reaps it. Returns nullopt if it is
  // still running. Once reaped, returns the same status on every call.
  std::optional<ExitStatus> Wait(std::chrono::milliseconds timeout);
  // True if the child has not ended yet (reaps it if it has).
  bool Running();

  // What the child has written so far to a captured stream ("" if not captured). After
  // Wait() returned a status, this is everything it wrote, once the child's copies of
  // the pipe are closed (a grandchild holding them can delay that; see WaitForOutput).
  std::string out() const;
  std::string err() const;

  // Waits up to `timeout` until the captured stream contains `needle`. Returns whether it
  // does. Returns early with false if the stream is closed without it.
  bool WaitForOutput(Stream stream, std::string_view needle, std::chrono::milliseconds timeout);

  struct State;  // an implementation detail of subprocess.cc

 private:
  friend RunResult RunCommand(std::vector<std::string> argv, RunOptions options);
  explicit Process(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_SUBPROCESS_H_
