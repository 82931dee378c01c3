// The fleet simulation's checker (fleet_sim.cc): reads the etcd register's history, event
// by event in revision order (a watch from revision 1 over every fleet's prefix), and
// holds it to the two properties docs/etcd-fencing.md rests on:
//
//   - one holder per machine number: `P machines/N` is put only where it is absent (a new
//     claim) or already names the same holder (a holder taking its own record back under
//     a new lease); one lease is bound to one number at a time; and every write of
//     `P high-water/N` that carries a holder's lease (raises, clean stops) is made while
//     that lease still binds `P machines/N`, since the write compares it;
//   - the mark never moves down: each `P high-water/N` is at least the one before, and is
//     never deleted.
//
// The simulation writes no clean stop (the one write allowed to lower a mark) and runs no
// `raise-all`, so "never down" is checked without exception.
//
// The checker reads the records with a decoder of its own, from the layout docs/etcd-
// fencing.md gives ("The keys"), not with register/etcd_records.h: what it checks is the
// code that writes them. Keys: <fleet prefix>machines/N, <fleet prefix>high-water/N; any
// other key (the fleet record, the simulation's end marker) is counted and ignored.
//
// Pure: no I/O. Not thread-safe: one reader feeds it.

#ifndef SNOWFLAKE_TESTS_DAEMON_FLEET_HISTORY_H_
#define SNOWFLAKE_TESTS_DAEMON_FLEET_HISTORY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace snowflake::testing {

// One change of one key, as etcd's watch reports it.
struct HistoryEvent {
  int64_t revision = 0;
  bool deleted = false;  // a delete (a lease that ended takes its keys with it)
  std::string key;
  std::string value;  // the value put; empty for a delete
  int64_t lease = 0;  // the lease the key is bound to after a put; 0: none
};

// A property broken at one revision.
struct HistoryViolation {
  // "double_holder", "lease_on_two_numbers", "mark_written_without_the_claim",
  // "mark_down", "mark_deleted", "holder_without_lease", "unreadable_value",
  // "revision_out_of_order".
  std::string kind;
  std::string key;
  int64_t revision = 0;
  std::string detail;  // what was there before and what came
};

// What the history held, for the report (a run that checked nothing proves nothing).
struct HistoryCounts {
  uint64_t events = 0;
  uint64_t claims = 0;          // machines/N created
  uint64_t takeovers = 0;       // ... of a number whose mark another holder wrote
  uint64_t retakes = 0;         // machines/N put again by its own holder, a new lease
  uint64_t holder_deletes = 0;  // machines/N gone with its lease
  uint64_t mark_writes = 0;     // high-water/N puts
  uint64_t other_events = 0;    // keys of neither kind
  uint64_t numbers_seen = 0;    // distinct (prefix, N) with a holder or a mark
  uint64_t max_held = 0;        // the most numbers held at one revision
};

class FleetHistory {
 public:
  // Adds one event. REQUIRES (else a violation of kind revision_out_of_order): revisions
  // come in the order etcd assigned them; events of one revision in their order in it.
  void Add(const HistoryEvent& event);

  const std::vector<HistoryViolation>& violations() const { return violations_; }
  const HistoryCounts& counts() const { return counts_; }
  int64_t last_revision() const { return last_revision_; }

 private:
  struct Holder {
    std::string holder;
    int64_t lease = 0;
    int64_t revision = 0;
  };
  struct Mark {
    int64_t unix_ms = 0;
    std::string holder;
    int64_t lease = 0;
    int64_t revision = 0;
  };
  struct Number {
    std::optional<Holder> holder;
    std::optional<Mark> mark;
  };

  void AddHolder(const HistoryEvent& event, Number& number);
  void AddMark(const HistoryEvent& event, Number& number);
  void Violate(std::string kind, const HistoryEvent& event, std::string detail);

  std::map<std::string, Number> numbers_;           // by "<prefix>|N"
  std::map<int64_t, std::string> holder_of_lease_;  // lease -> the machines/N key it binds
  std::vector<HistoryViolation> violations_;
  HistoryCounts counts_;
  uint64_t held_ = 0;
  int64_t last_revision_ = 0;
};

// One line of etcd's JSON gateway watch stream ({"result":{...,"events":[...]}}): its
// events with keys and values decoded from base64. A line without events (the watch's
// creation, a progress notice) gives none. Errors: a line that is not the gateway's watch
// answer, a cancelled watch (with etcd's reason, e.g. a compacted revision), bad base64.
tl::expected<std::vector<HistoryEvent>, std::string> ParseWatchLine(std::string_view line);

// Base64 as etcd's gateway writes keys and values (standard alphabet, padded).
std::string Base64Encode(std::string_view bytes);
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FLEET_HISTORY_H_
