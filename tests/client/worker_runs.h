// Many client processes taking at once: spawns tests/client/client_worker "take" processes
// against one runtime dir, waits for them, reads the TakeRecord file each of their threads
// wrote and runs the IdChecker over all of them. Shared by the tests against the stand-in
// producer (client_process_test) and against the real daemon (client_daemon_test), so both
// check the same property the same way.
//
// Not thread-safe: call from the test's thread.

#ifndef SNOWFLAKE_TESTS_CLIENT_WORKER_RUNS_H_
#define SNOWFLAKE_TESTS_CLIENT_WORKER_RUNS_H_

#include <cstddef>
#include <filesystem>

#include "id_checker.h"

namespace snowflake::testing {

struct TakeWorkers {
  std::filesystem::path runtime_dir;  // where the daemon (or stand-in) serves
  std::filesystem::path work_dir;     // gets the baton file and the record files
  int processes = 0;
  int threads = 0;  // per process
  size_t takes_per_thread = 0;
};

// Runs the workers to completion and checks every record they wrote. A worker that does
// not exit 0 within 240 s is a fatal failure (the records would be incomplete), so call it
// as ASSERT_NO_FATAL_FAILURE(RunTakeWorkers(workers, &result)).
void RunTakeWorkers(const TakeWorkers& workers, IdCheckResult* result);

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_CLIENT_WORKER_RUNS_H_
