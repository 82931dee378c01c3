// The generator: turns clock readings into strictly increasing IDs of one machine number,
// and owns the clock policy of docs/design.md §6 (refuse readings behind the last
// issued millisecond; pause on a small step back, go out of service on a large one).
//
// Pure logic: no I/O, no logging, no locks. The caller (the fill loop) logs state changes
// by comparing state() before and after a call.

#ifndef SNOWFLAKE_DAEMON_CORE_GENERATOR_H_
#define SNOWFLAKE_DAEMON_CORE_GENERATOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "protocol/vocabulary.h"
#include "snowflake/clock.h"
#include "snowflake/id_layout.h"
#include "snowflake/segment_layout.h"

namespace snowflake::daemon {

// Who set the millisecond the generator's mark stands at: the vocabulary's table
// (protocol/vocabulary.h), whose codes are the status's `clock_wait.set_by`.
using vocab::MarkSource;

struct GeneratorConfig {
  IdLayout layout;   // the fleet's epoch and bit layout
  uint32_t machine;  // below layout.machine_count(), claimed from the register
  // A clock step back of at most this many ms pauses generation until the clock catches
  // up by itself; a larger one needs an operator's Resume().
  int64_t max_backward_ms = 100;
  // Nothing is ever issued at or below this millisecond: the largest ms that may have
  // been issued by an earlier life of this machine number (segment, state file, register).
  int64_t high_water_unix_ms = 0;
  // At Create(), a clock behind high_water_unix_ms by at most max(max_backward_ms,
  // start_wait_ms) only pauses until it passes the mark. A caller that persists a
  // reservation ahead of the clock sets this to that lead (plus max_backward_ms), so a
  // fast restart waits for its own reservation instead of needing an operator. The bound
  // holds for that whole wait; a clock falling further behind goes out of service.
  int64_t start_wait_ms = 0;
  // Who set high_water_unix_ms (reported while the generator waits for it).
  MarkSource high_water_source = MarkSource::kNone;
};

enum class GeneratorState {
  kServing,       // the clock is at or past the mark: IDs can be issued
  kPaused,        // the clock went behind the mark; serving resumes by itself once it is
                  // strictly past the mark's millisecond (the step closes that ms)
  kOutOfService,  // clock trouble beyond the automatic bound, or the epoch's range is
                  // used up: nothing is issued until Resume()
};

enum class GeneratorErrorCode {
  kMachineOutOfRange,      // config.machine > config.layout.max_machine()
  kEpochInFuture,          // the epoch is later than the clock's reading: fix the clock or
                           // the epoch
  kNegativeMaxBackwardMs,  // config.max_backward_ms < 0
};

struct GeneratorError {
  GeneratorErrorCode code;
  std::string message;  // a sentence naming the value and what is expected
};

// Why Generate()/Next() produced nothing.
enum class GenerateError {
  // Every ID of the current millisecond is issued (or the current millisecond is at or
  // below the high-water mark). The generator is still serving: call again once the
  // clock has reached the next millisecond.
  kSequenceExhausted,
  // state() is kPaused: the clock is behind the mark (reason() says by how much). Call
  // again later; the generator serves again by itself once the clock passes the mark.
  kPaused,
  // state() is kOutOfService (reason() says why). Nothing is issued until Resume().
  kOutOfService,
};

// A Generator is NOT thread-safe: exactly one thread (the fill loop) may call its
// methods, including the accessors, without external synchronization. It is movable, not
// copyable, and keeps a reference to the Clock, which must outlive it.
//
// Invariants, whatever the clock does:
// - every ID it returns is strictly greater than every ID it returned before;
// - the ms inside an ID is the clock's reading taken in the same Generate() call, never
//   a later one (no borrowing of future milliseconds) and always strictly greater than
//   config.high_water_unix_ms and every mark passed to RaiseHighWater();
// - the sequence never wraps: after the layout's ids_per_ms() IDs in one ms it waits for
//   the next ms.
class Generator {
 public:
  // Reads the clock once and checks it against the high-water mark:
  // - clock behind the mark by <= max_backward_ms: starts kPaused;
  // - behind by more: starts kOutOfService (until Resume());
  // - clock beyond the range of the layout's time bits: starts kOutOfService.
  // Errors (nothing is created; fix the configuration or the clock):
  // - kMachineOutOfRange: machine > layout.max_machine();
  // - kEpochInFuture: layout.epoch_unix_ms() > the clock's reading;
  // - kNegativeMaxBackwardMs: max_backward_ms < 0.
  [[nodiscard]] static tl::expected<Generator, GeneratorError> Create(const GeneratorConfig& config,
                                                        Clock& clock) noexcept;

  Generator(Generator&&) noexcept = default;
  Generator& operator=(Generator&&) noexcept = default;
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Fills a prefix of `out` with strictly increasing IDs and returns its length: at
  // least 1, unless `out` is empty (then 0). A short count means the current ms is used
  // up, or the clock fell behind the mark mid-batch (then state() changed: check it).
  // When the current ms is used up it reads the clock again, so a batch crosses ms
  // boundaries; it reads the clock at most once per millisecond it issues in, plus once.
  // Errors (nothing was written to `out`): kSequenceExhausted, kPaused, kOutOfService,
  // as documented on GenerateError.
  [[nodiscard]] tl::expected<size_t, GenerateError> Generate(std::span<uint64_t> out) noexcept;

  // One ID; same rules and errors as Generate().
  [[nodiscard]] tl::expected<uint64_t, GenerateError> Next() noexcept;

  // Reads the clock once and judges it as Generate() would, issuing nothing: a paused
  // generator whose clock has passed the mark serves again, one whose clock fell too far
  // behind goes out of service. For a caller that may not issue now (the reservation's
  // horizon is behind the clock) but must know whether the clock still holds it up:
  // without it a pause would end only with the next Generate(), and its reason would
  // outlive its cause. No effect when kOutOfService (only Resume() leaves that).
  void JudgeClock() noexcept;

  // The operator's "I have checked the clock": leaves kOutOfService and re-reads the
  // clock. Never permits issuing at or below the mark: a clock still behind the mark
  // (by any amount) leaves the generator kPaused until it passes; a clock beyond the
  // epoch's range leaves it kOutOfService. No effect when not kOutOfService.
  void Resume() noexcept;

  // Nothing will be issued at or below unix_ms from now on. Never lowers the mark; takes
  // effect without reading the clock (the next Generate() judges the clock against it).
  // `source`: who set it (mark_source() reports it while the mark is the generator's).
  void RaiseHighWater(int64_t unix_ms, MarkSource source = MarkSource::kRegister) noexcept;

  // An operator's fence (`snowflakectl register raise-all --while-running`): as
  // RaiseHighWater(), but a clock behind the fence only pauses, with the reason kFenced,
  // however far ahead the fence lies; serving resumes by itself once the clock passes it.
  // A clock that steps back further during that wait (more than max_backward_ms beyond
  // where it stood when the fence came) goes out of service as any other step would.
  void RaiseFence(int64_t unix_ms) noexcept;

  GeneratorState state() const noexcept { return state_; }
  // Why the generator is not serving ("" when serving): the vocabulary's text of
  // reason_code() (vocab::DescribeReason, as the status and /healthz word it), then what
  // only the generator knows ("(ends 2039-09-19)", the bound passed, what to do). Changes
  // only with state or with how far behind the clock is.
  const std::string& reason() const noexcept { return reason_; }
  // The vocabulary's reason code for reason() (kNone when serving).
  shm::StateReason reason_code() const noexcept { return reason_code_; }
  // The last ID returned, if any.
  std::optional<uint64_t> last_issued_id() const noexcept { return last_issued_id_; }
  // The newest millisecond that may carry an ID of this machine: the last issued ms, or
  // the high-water mark if that is newer. This is what the caller persists.
  int64_t last_unix_ms() const noexcept { return mark_ms_; }
  // Who set last_unix_ms(): what a paused generator waits for the clock to pass.
  MarkSource mark_source() const noexcept { return mark_source_; }
  // How many times clock trouble took the generator out of kServing (into kPaused or
  // kOutOfService), including a start behind the high-water mark.
  uint64_t pauses_total() const noexcept { return pauses_total_; }
  // How far the latest clock reading was behind the mark, in ms (0 if not behind).
  int64_t ms_behind() const noexcept { return ms_behind_; }
  const GeneratorConfig& config() const noexcept { return config_; }

 private:
  Generator(const GeneratorConfig& config, Clock& clock) noexcept;

  // Judges a clock reading and sets state_, reason_ and ms_behind_. Returns true if IDs
  // may be issued at now_ms (the generator is kServing and now_ms >= mark_ms_).
  // `at_start`: the reading is Create()'s, so trouble is reported against the persisted
  // high-water mark.
  bool Admit(int64_t now_ms, bool at_start) noexcept;
  // Leaves kServing (or changes trouble): reason_ is the vocabulary's text of `code` with
  // `detail`, then `context`.
  void EnterTrouble(GeneratorState state, shm::StateReason code, int64_t detail,
                    std::string_view context) noexcept;

  GeneratorConfig config_;
  Clock* clock_;  // not owned; outlives *this

  // The mark: no future ID may carry a ms below it, and IDs at mark_ms_ may only use
  // sequences >= next_sequence_ (ids_per_ms_: the ms is used up).
  int64_t mark_ms_;
  MarkSource mark_source_;
  uint32_t ids_per_ms_;  // the layout's cap per millisecond: 2^sequence bits
  uint32_t next_sequence_;
  std::optional<uint64_t> last_issued_id_;

  GeneratorState state_ = GeneratorState::kServing;
  shm::StateReason reason_code_ = shm::StateReason::kNone;
  std::string reason_;
  bool resumed_ = false;  // Resume() was called and the clock has not passed the mark yet
  // The trouble began at Create(), behind the persisted high-water mark; until serving
  // again it is reported as that (kBehindHighWater), as the daemon's status does.
  bool started_behind_ = false;
  // RaiseFence() moved the mark ahead and no clock reading has judged it yet: the next
  // reading behind the mark starts a kFenced pause bounded from where the clock stands.
  bool fence_pending_ = false;
  uint64_t pauses_total_ = 0;
  // How far behind the mark the current pause may fall before it is out of service:
  // max_backward_ms, or the start bound for a pause that began at Create().
  int64_t allowed_behind_ms_ = 0;
  int64_t ms_behind_ = 0;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_GENERATOR_H_
