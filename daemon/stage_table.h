// An ordered start/stop table (chrony's main.c: the XXX_Initialise() calls in order, the
// main loop, the XXX_Finalise() calls backwards): each stage has a name, a start and a
// stop. Start() runs the starts in the order the stages were added; Stop() runs the stops
// of the stages that started, in exactly the reverse order. A start that fails stops the
// stages started before it, in reverse, before Start() returns its failure; so every stop
// order is written once, in the table, whichever way the daemon ends.
//
//   StageTable table;
//   table.Add("state file", [&] { return LoadState(); }, [&] { UnlockState(); });
//   table.Add("segment", [&] { return OpenSegment(); }, [&] { CloseSegment(); });
//   if (auto started = table.Start(); !started) return started.error().exit_status;
//   ...   // serve
//   table.Stop();   // segment, then state file
//
// Not thread-safe: one thread (or threads one after another) calls Add, Start and Stop.
// The observer is called on that thread.

#ifndef SNOWFLAKE_DAEMON_STAGE_TABLE_H_
#define SNOWFLAKE_DAEMON_STAGE_TABLE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace snowflake::daemon {

// Why a stage did not start: the process's exit status (kExit*, daemon/exit_status.h) and
// the sentence that was logged. kExitOk when a stop was requested before the stage could
// finish (a stop signal while waiting for the register).
struct StageFailure {
  int exit_status;
  std::string message;
};

enum class StageStep {
  kStarted,  // its start returned success
  kFailed,   // its start returned a failure (its stop is not run)
  kStopped,  // its stop returned
};

class StageTable {
 public:
  using StartFn = std::function<tl::expected<void, StageFailure>()>;
  using StopFn = std::function<void()>;
  using Observer = std::function<void(std::string_view stage, StageStep step)>;

  // Appends a stage: it starts after every stage added before it and stops before them.
  // `start` or `stop` may be empty (nothing to do on that side). REQUIRES: not started.
  void Add(std::string name, StartFn start, StopFn stop);

  // Called after each step of each stage. May be empty.
  void SetObserver(Observer observer) { observer_ = std::move(observer); }

  // Starts every stage in order. On a failure: stops the stages started so far, in
  // reverse, and returns the failure (nothing is left started). Exceptions from a start
  // or stop propagate; Stop() then stops what had started. REQUIRES: called once.
  [[nodiscard]] tl::expected<void, StageFailure> Start();

  // Stops the started stages in reverse order. Idempotent; a no-op before Start().
  void Stop();

  // The stages' names in start order.
  std::vector<std::string> names() const;
  // How many stages are started now.
  size_t started() const noexcept { return started_; }

 private:
  struct Stage {
    std::string name;
    StartFn start;
    StopFn stop;
  };

  void Notify(const Stage& stage, StageStep step) const;

  std::vector<Stage> stages_;
  Observer observer_;
  size_t started_ = 0;  // stages_[0, started_) are started
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_STAGE_TABLE_H_
