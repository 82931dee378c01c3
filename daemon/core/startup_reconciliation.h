// Where a starting daemon stands: a pure function of what the segment, the state file,
// the register and the clock say (docs/design.md §5, "The high-water mark" and "Restarting
// on a surviving segment"). Tested as a table (tests/daemon/startup_reconciliation_test.cc).
//
// Thread-safe: a pure function.

#ifndef SNOWFLAKE_DAEMON_CORE_STARTUP_RECONCILIATION_H_
#define SNOWFLAKE_DAEMON_CORE_STARTUP_RECONCILIATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "daemon/core/high_water_store.h"
#include "protocol/vocabulary.h"
#include "register/machine_lock.h"

namespace snowflake::daemon {

struct SegmentFacts {
  std::string path;
  bool continued = false;  // continues a surviving segment of this boot (RingProducer::continued)
  uint64_t last_published_id = 0;  // RingProducer::last_published_id(); 0 if none
  uint64_t incarnation = 0;        // the segment this start serves (a continued one: the old + 1)
};

struct StartupFacts {
  int64_t now_unix_ms = 0;  // one clock reading
  int64_t epoch_unix_ms = 0;
  IdBits id_bits = kDefaultIdBits;       // the layout the segment's IDs have
  uint32_t machine = 0;                  // the number just claimed
  int64_t register_high_water_ms = 0;    // MachineClaim::high_water_unix_ms
  // MachineClaim::mark_writer: the claim that last wrote the register's mark (nullopt: the
  // backend does not tell).
  std::optional<int64_t> register_mark_writer = std::nullopt;
  std::optional<HighWaterState> state_file;  // nullopt: no file (a first start)
  SegmentFacts segment;
  int64_t reservation_ms = 1000;
  int64_t max_backward_ms = 100;
  // The number's highest host mark (ReadHostMarks: the newest millisecond a trusted daemon
  // of this host reserved for it, also before a reboot; nullopt: none) and the identity of this
  // daemon's state directory (state_identity.h), which names the marks it wrote itself. Not
  // its path: another daemon's state directory may have the same path (a pod's emptyDir
  // and the host's /var/lib/snowflaked).
  std::optional<reg::HostMark> host_mark = std::nullopt;
  std::string state_identity = {};
};

struct StartupPlan {
  // Nothing is issued at or below this millisecond.
  int64_t high_water_unix_ms = 0;
  // How far behind high_water_unix_ms the clock may be and still only wait (beyond:
  // out of service). Generator's start_wait_ms.
  int64_t start_wait_ms = 0;
  // The reservation already durable in both stores for this number: the fill loop may
  // publish up to it before the reservation service's first renewal.
  int64_t confirmed_through_unix_ms = 0;
  // The surviving segment records exactly what was published since the reservation was
  // made: the reservation need not be waited out.
  bool trusted_segment = false;
  // Who set high_water_unix_ms: what a start behind it reports that it waits for.
  vocab::MarkSource high_water_source = vocab::MarkSource::kNone;
  // One line for the log: where the mark comes from.
  std::string explanation;
};

// Errors (the start must be refused, exit status kExitConfig): the state file was written
// for another epoch; the sentence follows the state file's path ("... was written for
// epoch ...").
[[nodiscard]] tl::expected<StartupPlan, std::string> ReconcileStartup(const StartupFacts& facts);

// Whether a loaded state file may be adopted: its reservation and floor lie at most
// `max_forward_ms` (clock.max_forward_ms) past `reference_unix_ms`, the later of the clock
// and the register's mark for the claimed number (FarPast). One further ahead means the
// clock or the file is wrong; adopting it would keep the number out of service until the
// clock reached it, and write it into the register. Errors (the start must be refused,
// exit status kExitConfig): a sentence that follows the state file's path ("says ...").
[[nodiscard]] tl::expected<void, std::string> CheckStateFileAgainstClock(
    const HighWaterState& state, int64_t reference_unix_ms, int64_t max_forward_ms);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_STARTUP_RECONCILIATION_H_
