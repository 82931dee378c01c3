// The properties every ring test checks, on records of takes (docs/design.md §1, §4):
//   (1) uniqueness: no ID appears twice, across all recorders;
//   (2) per-recorder order: each recorder's IDs strictly increase in the order it took
//       them (a recorder is one thread, or one process incarnation);
//   (3) real-time order: a take that began after another completed gets a larger ID.
//
// (3) is checked through a baton: before each take a recorder reads (seq_cst) a global
// "largest ID whose take has completed" and stores it in the record as
// `max_completed_before`; after the take it raises the baton (CAS-max). Every take that
// completed before this one began is <= that value, so id > max_completed_before for
// every record is exactly the real-time property for all such pairs.
//
// An IdChecker is not thread-safe: fill it after the takes are over.

#ifndef SNOWFLAKE_TESTS_SUPPORT_ID_CHECKER_H_
#define SNOWFLAKE_TESTS_SUPPORT_ID_CHECKER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace snowflake::testing {

struct TakeRecord {
  uint64_t id;
  uint64_t max_completed_before;  // the baton read before the take began
};
static_assert(sizeof(TakeRecord) == 16, "recorded in shared files by helper processes");

struct IdCheckResult {
  uint64_t ids = 0;
  uint64_t recorders = 0;
  uint64_t duplicates = 0;        // IDs seen more than once (each extra sighting counts)
  uint64_t not_increasing = 0;    // records not above their recorder's previous one
  uint64_t order_violations = 0;  // records not above their max_completed_before
  // The first few problems, in words, for assertion messages.
  std::vector<std::string> examples;

  bool ok() const { return duplicates == 0 && not_increasing == 0 && order_violations == 0; }
  // "12345 IDs from 6 recorders: 0 duplicates, 0 not increasing, 0 order violations" and
  // the examples.
  std::string Summary() const;
};

class IdChecker {
 public:
  // Adds one recorder's records in the order it took them. `name` appears in examples.
  void AddRecorder(std::string name, std::span<const TakeRecord> records);
  IdCheckResult Check() const;

 private:
  struct Recorder {
    std::string name;
    std::vector<TakeRecord> records;
  };
  std::vector<Recorder> recorders_;
};

// The baton of property (3): raises `baton` to at least `id` (a CAS-max loop).
inline void RaiseBaton(std::atomic<uint64_t>& baton, uint64_t id) {
  uint64_t seen = baton.load(std::memory_order_seq_cst);
  // (1) seen >= id: someone already raised it further, done; (2) the CAS wins: raised;
  // (3) it loses: `seen` is the newer value, retry.
  while (seen < id && !baton.compare_exchange_weak(seen, id, std::memory_order_seq_cst)) {
  }
}

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_ID_CHECKER_H_
