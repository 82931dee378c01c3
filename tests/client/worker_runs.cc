#include "worker_runs.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "subprocess.h"
#include "test_paths.h"

namespace snowflake::testing {
namespace {

// client_worker writes each thread's records as a plain array of TakeRecord.
std::vector<TakeRecord> ReadRecordFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<TakeRecord> records(std::filesystem::file_size(path) / sizeof(TakeRecord));
  in.read(reinterpret_cast<char*>(records.data()),
          static_cast<std::streamsize>(records.size() * sizeof(TakeRecord)));
  return records;
}

}  // namespace

void RunTakeWorkers(const TakeWorkers& workers, IdCheckResult* result) {
  const std::string baton = (workers.work_dir / "baton").string();
  { std::ofstream(baton, std::ios::binary).write("\0\0\0\0\0\0\0\0", 8); }

  std::vector<Process> processes;
  for (int p = 0; p < workers.processes; ++p) {
    processes.push_back(Process::Spawn(
        {kClientWorkerPath, "take", workers.runtime_dir.string(), baton,
         (workers.work_dir / ("out" + std::to_string(p))).string(), std::to_string(workers.threads),
         std::to_string(workers.takes_per_thread)}));
  }
  for (auto& worker : processes) {
    auto status = worker.Wait(std::chrono::seconds(240));
    ASSERT_TRUE(status && status->ExitedWith(0))
        << (status ? status->ToString() : "still running") << ": " << worker.err();
  }

  IdChecker checker;
  for (int p = 0; p < workers.processes; ++p) {
    for (int t = 0; t < workers.threads; ++t) {
      const auto path =
          workers.work_dir / ("out" + std::to_string(p) + "." + std::to_string(t));
      checker.AddRecorder("process " + std::to_string(p) + " thread " + std::to_string(t),
                          ReadRecordFile(path));
    }
  }
  *result = checker.Check();
}

}  // namespace snowflake::testing
