#include "daemon/core/generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "protocol/vocabulary.h"

namespace snowflake::daemon {
namespace {

// "YYYY-MM-DD" of a Unix ms in UTC, for reasons and error messages.
std::string FormatUtcDate(int64_t unix_ms) {
  using namespace std::chrono;
  const sys_days day = floor<days>(sys_time<milliseconds>(milliseconds(unix_ms)));
  const year_month_day ymd(day);
  char text[32];
  std::snprintf(text, sizeof text, "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return text;
}

// What follows the vocabulary's text of an out-of-service `reason`: the bound passed and
// what to do. `allowed_ms` is max_backward_ms, or the larger bound of a start
// (start_wait_ms).
std::string OutOfServiceAdvice(shm::StateReason reason, int64_t allowed_ms,
                               int64_t max_backward_ms) {
  std::string bound;
  if (allowed_ms != max_backward_ms) {
    bound = "more than the " + std::to_string(allowed_ms) + " ms a restart may wait";
  } else if (reason == shm::StateReason::kClockStepTooLarge) {
    bound = "max_backward_ms=" + std::to_string(max_backward_ms);  // its text says "more than"
  } else {
    bound = "more than max_backward_ms=" + std::to_string(max_backward_ms);
  }
  return " (" + bound + "); run `snowflakectl resume` after checking the clock";
}

}  // namespace

Generator::Generator(const GeneratorConfig& config, Clock& clock) noexcept
    : config_(config),
      clock_(&clock),
      // The epoch acts as a mark just below its first millisecond, so a clock read
      // before the epoch is refused like any other step behind the mark.
      mark_ms_(std::max(config.high_water_unix_ms, config.layout.epoch_unix_ms() - 1)),
      mark_source_(config.high_water_unix_ms >= config.layout.epoch_unix_ms()
                       ? config.high_water_source
                       : MarkSource::kNone),
      ids_per_ms_(config.layout.ids_per_ms()),
      next_sequence_(ids_per_ms_) {}

tl::expected<Generator, GeneratorError> Generator::Create(const GeneratorConfig& config,
                                                          Clock& clock) noexcept {
  if (config.machine > config.layout.max_machine()) {
    return tl::unexpected(
        GeneratorError{GeneratorErrorCode::kMachineOutOfRange,
                       "machine number " + std::to_string(config.machine) +
                           " is out of range: it must be between 0 and " +
                           std::to_string(config.layout.max_machine()) + " (the layout " +
                           FormatIdBits(config.layout.bits()) + " has " +
                           std::to_string(config.layout.machine_count()) + " machine numbers)"});
  }
  if (config.max_backward_ms < 0) {
    return tl::unexpected(GeneratorError{
        GeneratorErrorCode::kNegativeMaxBackwardMs,
        "max_backward_ms is " + std::to_string(config.max_backward_ms) +
            ": it must be 0 or more (milliseconds of clock step back that pause generation)"});
  }
  const int64_t now_ms = clock.NowUnixMs();
  const int64_t epoch_ms = config.layout.epoch_unix_ms();
  if (epoch_ms > now_ms) {
    return tl::unexpected(GeneratorError{
        GeneratorErrorCode::kEpochInFuture,
        "the epoch (Unix ms " + std::to_string(epoch_ms) + ", " + FormatUtcDate(epoch_ms) +
            ") is later than the clock (Unix ms " + std::to_string(now_ms) +
            "): no ID can be numbered before its epoch; check the clock and the configured "
            "epoch"});
  }
  Generator generator(config, clock);
  generator.Admit(now_ms, /*at_start=*/true);
  return generator;
}

void Generator::EnterTrouble(GeneratorState state, shm::StateReason code, int64_t detail,
                             std::string_view context) noexcept {
  if (state_ == GeneratorState::kServing) ++pauses_total_;
  state_ = state;
  reason_code_ = code;
  // The vocabulary's words for the condition, as the status and /healthz give them, then
  // what only the generator knows (the range's end, the bound passed, what to do).
  reason_ = vocab::DescribeReason(code, detail);
  reason_ += context;
}

bool Generator::Admit(int64_t now_ms, bool at_start) noexcept {
  const IdLayout& layout = config_.layout;
  // 1. Past the range of the layout's time bits: numbering on would wrap into the epoch's first ms.
  if (now_ms > layout.max_unix_ms()) {
    ms_behind_ = 0;
    if (state_ != GeneratorState::kOutOfService) {
      resumed_ = false;
      EnterTrouble(GeneratorState::kOutOfService, shm::StateReason::kTimeRangeExhausted, 0,
                   " (ends " + FormatUtcDate(layout.max_unix_ms()) + ")");
    }
    return false;
  }
  // 2. Behind the mark: issuing now could repeat an ID or break time order.
  if (now_ms < mark_ms_) {
    const int64_t behind_ms = mark_ms_ - now_ms;
    ms_behind_ = behind_ms;
    // The clock went back: the mark's millisecond is closed too, so generation resumes
    // only once the clock has passed it (docs/design.md §6), never later in that same ms.
    next_sequence_ = ids_per_ms_;
    // Only Resume() leaves kOutOfService; its first reason stays the one to report.
    if (state_ == GeneratorState::kOutOfService) return false;
    if (at_start) started_behind_ = true;
    // An operator's fence ahead of the clock: wait for the clock to pass it, however far
    // ahead it lies, but fall no further behind it than the clock stands now plus a step.
    if (fence_pending_) {
      fence_pending_ = false;
      resumed_ = false;
      allowed_behind_ms_ = behind_ms + config_.max_backward_ms;
      EnterTrouble(GeneratorState::kPaused, shm::StateReason::kFenced, behind_ms,
                   " (serving resumes by itself once the clock passes it)");
      return false;
    }
    if (state_ == GeneratorState::kPaused && reason_code_ == shm::StateReason::kFenced) {
      if (behind_ms <= allowed_behind_ms_) return false;  // still waiting for the clock
      EnterTrouble(GeneratorState::kOutOfService, shm::StateReason::kClockStepTooLarge, behind_ms,
                   " while waiting for an operator's fence" +
                       OutOfServiceAdvice(shm::StateReason::kClockStepTooLarge,
                                          config_.max_backward_ms, config_.max_backward_ms));
      return false;
    }
    std::string context;
    if (resumed_) context = " (resumed; waiting for the clock to pass the last issued millisecond)";
    if (now_ms < layout.epoch_unix_ms()) {
      context += " (it reads before the epoch " + FormatUtcDate(layout.epoch_unix_ms()) + ")";
    }
    // A new pause may fall max_backward_ms behind (the start bound at Create()); one
    // already under way keeps the bound it began with.
    if (state_ != GeneratorState::kPaused) {
      allowed_behind_ms_ = at_start ? std::max(config_.max_backward_ms, config_.start_wait_ms)
                                    : config_.max_backward_ms;
    }
    // After Resume() the operator has vouched for the clock: any lag only waits.
    if (resumed_ || behind_ms <= allowed_behind_ms_) {
      // Keep the reason of the step that caused the pause while the clock catches up.
      if (state_ != GeneratorState::kPaused || resumed_) {
        EnterTrouble(
            GeneratorState::kPaused,
            started_behind_ ? shm::StateReason::kBehindHighWater : shm::StateReason::kClockBehind,
            behind_ms, context);
      }
    } else {
      // A start behind the mark keeps that reason (as the status does) however far the
      // clock then falls; otherwise the step was too large for a pause.
      const shm::StateReason code = started_behind_ ? shm::StateReason::kBehindHighWater
                                                    : shm::StateReason::kClockStepTooLarge;
      EnterTrouble(GeneratorState::kOutOfService, code, behind_ms,
                   context + OutOfServiceAdvice(code, allowed_behind_ms_, config_.max_backward_ms));
    }
    return false;
  }
  // 3. At or past the mark.
  ms_behind_ = 0;
  fence_pending_ = false;  // a fence at or behind the clock costs no pause
  if (state_ == GeneratorState::kOutOfService) return false;
  // Paused, and the clock is back at the (closed) mark but not yet past it: still paused.
  if (state_ == GeneratorState::kPaused && now_ms == mark_ms_ && next_sequence_ == ids_per_ms_) {
    return false;
  }
  if (state_ == GeneratorState::kPaused) {
    state_ = GeneratorState::kServing;
    reason_code_ = shm::StateReason::kNone;
    reason_.clear();
    resumed_ = false;
    started_behind_ = false;
  }
  return true;
}

tl::expected<size_t, GenerateError> Generator::Generate(std::span<uint64_t> out) noexcept {
  if (out.empty()) return 0;
  int64_t now_ms = clock_->NowUnixMs();
  if (!Admit(now_ms, /*at_start=*/false)) {
    return tl::unexpected(state_ == GeneratorState::kPaused ? GenerateError::kPaused
                                                            : GenerateError::kOutOfService);
  }
  const int64_t epoch_ms = config_.layout.epoch_unix_ms();
  size_t filled = 0;
  for (;;) {
    // Admit() guarantees now_ms >= mark_ms_ and now_ms <= max_unix_ms().
    if (now_ms > mark_ms_) {
      mark_ms_ = now_ms;
      mark_source_ = MarkSource::kLastIssued;
      next_sequence_ = 0;
    }
    const size_t count =
        std::min(out.size() - filled, static_cast<size_t>(ids_per_ms_ - next_sequence_));
    if (count == 0) break;  // only on the first pass: this ms was used up before the call
    const uint64_t base = config_.layout.EncodeUnchecked(mark_ms_ - epoch_ms, config_.machine, 0);
    for (size_t i = 0; i < count; ++i) {
      out[filled + i] = base | (next_sequence_ + i);
    }
    filled += count;
    next_sequence_ += static_cast<uint32_t>(count);
    if (filled == out.size()) break;
    // This ms is used up and the caller wants more: one reading decides whether a newer
    // ms has begun. Never the next ms without the clock's word for it.
    const int64_t later_ms = clock_->NowUnixMs();
    if (later_ms == mark_ms_) break;
    if (!Admit(later_ms, /*at_start=*/false)) break;  // state() tells the caller why
    now_ms = later_ms;
  }
  if (filled == 0) return tl::unexpected(GenerateError::kSequenceExhausted);
  last_issued_id_ = out[filled - 1];
  return filled;
}

tl::expected<uint64_t, GenerateError> Generator::Next() noexcept {
  uint64_t id = 0;
  auto generated = Generate(std::span<uint64_t>(&id, 1));
  if (!generated) return tl::unexpected(generated.error());
  return id;
}

void Generator::JudgeClock() noexcept {
  if (state_ == GeneratorState::kOutOfService) return;
  Admit(clock_->NowUnixMs(), /*at_start=*/false);
}

void Generator::Resume() noexcept {
  if (state_ != GeneratorState::kOutOfService) return;
  resumed_ = true;
  state_ = GeneratorState::kPaused;
  // Paused now, so a step too large for a pause reads as the clock being behind.
  if (reason_code_ == shm::StateReason::kClockStepTooLarge) {
    reason_code_ = shm::StateReason::kClockBehind;
  }
  reason_ = vocab::DescribeReason(reason_code_, ms_behind_);
  reason_ += " (resumed; waiting for a clock reading)";
  Admit(clock_->NowUnixMs(), /*at_start=*/false);
}

void Generator::RaiseFence(int64_t unix_ms) noexcept {
  if (unix_ms < mark_ms_ || (unix_ms == mark_ms_ && next_sequence_ == ids_per_ms_)) return;
  RaiseHighWater(unix_ms, MarkSource::kFence);
  fence_pending_ = true;
}

void Generator::RaiseHighWater(int64_t unix_ms, MarkSource source) noexcept {
  config_.high_water_unix_ms = std::max(config_.high_water_unix_ms, unix_ms);
  if (unix_ms > mark_ms_) {
    mark_ms_ = unix_ms;
    mark_source_ = source;
    next_sequence_ = ids_per_ms_;
  } else if (unix_ms == mark_ms_) {
    mark_source_ = source;
    next_sequence_ = ids_per_ms_;  // "at or below": the rest of this ms is off limits too
  }
}

}  // namespace snowflake::daemon
