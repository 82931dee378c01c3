#include "id_checker.h"

#include <algorithm>
#include <utility>

namespace snowflake::testing {
namespace {

constexpr size_t kMaxExamples = 10;

void AddExample(IdCheckResult& result, std::string text) {
  if (result.examples.size() < kMaxExamples) result.examples.push_back(std::move(text));
}

}  // namespace

std::string IdCheckResult::Summary() const {
  std::string text = std::to_string(ids) + " IDs from " + std::to_string(recorders) +
                     " recorders: " + std::to_string(duplicates) + " duplicates, " +
                     std::to_string(not_increasing) + " not increasing, " +
                     std::to_string(order_violations) + " order violations";
  for (const std::string& example : examples) text += "\n  " + example;
  return text;
}

void IdChecker::AddRecorder(std::string name, std::span<const TakeRecord> records) {
  recorders_.push_back(Recorder{std::move(name), {records.begin(), records.end()}});
}

IdCheckResult IdChecker::Check() const {
  IdCheckResult result;
  result.recorders = recorders_.size();
  size_t total = 0;
  for (const Recorder& recorder : recorders_) total += recorder.records.size();
  result.ids = total;

  std::vector<uint64_t> all;
  all.reserve(total);
  for (const Recorder& recorder : recorders_) {
    for (size_t i = 0; i < recorder.records.size(); ++i) {
      const TakeRecord& record = recorder.records[i];
      all.push_back(record.id);
      if (i > 0 && record.id <= recorder.records[i - 1].id) {
        ++result.not_increasing;
        AddExample(result, recorder.name + " record " + std::to_string(i) + ": ID " +
                               std::to_string(record.id) + " after " +
                               std::to_string(recorder.records[i - 1].id));
      }
      if (record.id <= record.max_completed_before) {
        ++result.order_violations;
        AddExample(result, recorder.name + " record " + std::to_string(i) + ": ID " +
                               std::to_string(record.id) + " taken after ID " +
                               std::to_string(record.max_completed_before) +
                               " had been taken (real-time order)");
      }
    }
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i) {
    if (all[i] == all[i - 1]) {
      ++result.duplicates;
      AddExample(result, "ID " + std::to_string(all[i]) + " taken more than once");
    }
  }
  return result;
}

}  // namespace snowflake::testing
