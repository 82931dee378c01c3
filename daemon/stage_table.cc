#include "daemon/stage_table.h"

#include <utility>

namespace snowflake::daemon {

void StageTable::Add(std::string name, StartFn start, StopFn stop) {
  stages_.push_back(Stage{std::move(name), std::move(start), std::move(stop)});
}

tl::expected<void, StageFailure> StageTable::Start() {
  while (started_ < stages_.size()) {
    const Stage& stage = stages_[started_];
    if (stage.start) {
      if (auto started = stage.start(); !started) {
        Notify(stage, StageStep::kFailed);
        Stop();
        return tl::unexpected(std::move(started.error()));
      }
    }
    ++started_;
    Notify(stage, StageStep::kStarted);
  }
  return {};
}

void StageTable::Stop() {
  while (started_ > 0) {
    // Counted down before the stop runs: a stop that throws is not run twice.
    const Stage& stage = stages_[--started_];
    if (stage.stop) stage.stop();
    Notify(stage, StageStep::kStopped);
  }
}

std::vector<std::string> StageTable::names() const {
  std::vector<std::string> names;
  names.reserve(stages_.size());
  for (const Stage& stage : stages_) names.push_back(stage.name);
  return names;
}

void StageTable::Notify(const Stage& stage, StageStep step) const {
  if (observer_) observer_(stage.name, step);
}

}  // namespace snowflake::daemon
