#include "daemon/core/startup_reconciliation.h"

#include <algorithm>

#include "register/register_settings.h"
#include "snowflake/id_layout.h"
#include "snowflake/time_text.h"

namespace snowflake::daemon {

tl::expected<StartupPlan, std::string> ReconcileStartup(const StartupFacts& f) {
  const std::optional<HighWaterState>& file = f.state_file;
  if (file && file->epoch_unix_ms != f.epoch_unix_ms) {
    // A later epoch shrinks every ID's time field: new IDs would repeat old ones of the
    // same machine number. Refuse rather than guess which the operator meant.
    return tl::unexpected(
        "was written for epoch " + std::to_string(file->epoch_unix_ms) +
        " (" + FormatTimeText(file->epoch_unix_ms) + ") but id.epoch is " +
        std::to_string(f.epoch_unix_ms) + " (" + FormatTimeText(f.epoch_unix_ms) +
        "): changing the epoch under the same state could repeat IDs. Restore the old epoch, "
        "or start this daemon with a new state directory and a machine number that never "
        "issued IDs under that epoch");
  }
  const int64_t file_mark = file ? file->reserved_through_unix_ms : 0;
  const int64_t segment_ms = f.segment.last_published_id != 0
                                 ? f.epoch_unix_ms + IdLayout::Create(f.epoch_unix_ms, f.id_bits)
                                                         .value_or(IdLayout())
                                                         .OffsetMsOf(f.segment.last_published_id)
                                 : 0;

  // Another daemon of this host (another state directory, another register) may have
  // served this number since our state file was written: its host mark says how far.
  const int64_t host_ms = f.host_mark ? f.host_mark->unix_ms : 0;
  // Ours only if it names our state directory's identity (an empty one names nothing).
  const bool host_mark_ours =
      !f.host_mark || (!f.state_identity.empty() && f.host_mark->writer == f.state_identity);

  StartupPlan plan;
  // Durable in both stores: what a renewal would otherwise have to write first.
  plan.confirmed_through_unix_ms = std::min(file_mark, f.register_high_water_ms);

  // The segment is trusted in place of the reservation only when it is the very segment
  // the reservation was made for, nobody served the number from it since (this start
  // continued it, and its incarnation moved by exactly that), it has published something,
  // the file is for this number, and no other holder of the number raised the register's
  // mark since. Where the register names the claim that last wrote its mark (etcd), that
  // claim must be the one the file recorded: the mark's value alone cannot tell, because
  // the file runs ahead of the register while it fails, other holders write marks from
  // their own clocks, and a clean stop lowers it.
  // Without such a token (file, static: one host, serialised by its locks) the mark must
  // not be above our own reservation.
  const bool register_unchanged =
      f.register_mark_writer
          ? file && file->register_claim && *file->register_claim == *f.register_mark_writer
          : file && f.register_high_water_ms <= file->reserved_through_unix_ms;
  plan.trusted_segment = file && f.segment.continued && f.segment.last_published_id != 0 &&
                         file->segment_path && *file->segment_path == f.segment.path &&
                         file->segment_incarnation + 1 == f.segment.incarnation &&
                         file->machine == f.machine && register_unchanged &&
                         f.register_high_water_ms <= file->reserved_through_unix_ms &&
                         (host_mark_ours || host_ms <= segment_ms);
  if (plan.trusted_segment) {
    // The segment records what was published, not what the last start stood above: a start
    // above another holder's mark that ended before publishing left the segment's last ID
    // below that mark. The state file's floor keeps it.
    plan.high_water_unix_ms = std::max(segment_ms, file->floor_unix_ms);
    plan.high_water_source = file->floor_unix_ms > segment_ms ? vocab::MarkSource::kStateFile
                                                              : vocab::MarkSource::kSegment;
    plan.start_wait_ms = file->floor_unix_ms > segment_ms ? f.reservation_ms + f.max_backward_ms
                                                          : f.max_backward_ms;
    plan.explanation = "the surviving segment's last ID (" + std::to_string(segment_ms) +
                       ") is exact: the reservation through " + std::to_string(file_mark) +
                       " need not be waited out" +
                       (file->floor_unix_ms > segment_ms
                            ? "; the last start stood above " + std::to_string(file->floor_unix_ms)
                            : std::string());
    return plan;
  }
  // Anything else: the largest millisecond that may carry an ID, whoever says so. The
  // file is used whatever number it was written for: that keeps host-wide time order
  // across a change of number.
  // The file's floor too: a fence the last start obeyed may lie beyond every mark (an
  // operator's fence ahead of the clock, then a register that does not keep it).
  const int64_t file_floor = file ? file->floor_unix_ms : 0;
  plan.high_water_unix_ms =
      std::max({f.register_high_water_ms, file_mark, file_floor, segment_ms, host_ms});
  // Who says so, on a tie this daemon's own state file first (a renewal writes the same
  // value there and to the register).
  plan.high_water_source = [&] {
    const int64_t mark = plan.high_water_unix_ms;
    if (mark == 0) return vocab::MarkSource::kNone;
    if (file && (file_mark == mark || file_floor == mark)) return vocab::MarkSource::kStateFile;
    if (f.register_high_water_ms == mark) return vocab::MarkSource::kRegister;
    if (host_ms == mark) return vocab::MarkSource::kHostMark;
    return vocab::MarkSource::kSegment;
  }();
  // A fast restart only waits for its own reservation; further behind is out of service.
  plan.start_wait_ms = f.reservation_ms + f.max_backward_ms;
  plan.explanation =
      "state file " + (file ? std::to_string(file_mark) : std::string("absent")) + ", register " +
      std::to_string(f.register_high_water_ms) + ", " +
      (f.segment.continued ? "continued" : "new") + " segment's last ID " +
      std::to_string(segment_ms) +
      (f.host_mark ? ", host mark " + std::to_string(host_ms) +
                         (host_mark_ours ? " (this daemon's)" : " (another daemon's)")
                   : std::string());
  return plan;
}

tl::expected<void, std::string> CheckStateFileAgainstClock(const HighWaterState& state,
                                                           int64_t reference_unix_ms,
                                                           int64_t max_forward_ms) {
  const auto check = [&](const char* key, int64_t value) -> tl::expected<void, std::string> {
    if (!reg::FarPast(value, reference_unix_ms, max_forward_ms)) return {};
    return tl::unexpected(
        std::string("says ") + key + " " + std::to_string(value) + " (" + FormatTimeText(value) +
        "), " + std::to_string(value - reference_unix_ms) +
        " ms past this host's clock and the register's mark, more than clock.max_forward_ms (" +
        std::to_string(max_forward_ms) +
        "): refusing to adopt it (it would keep the number out of service until then, and the "
        "register would take it). If the clock is wrong, set it right. If the clock is right, "
        "the file is wrong: move it away, and start once this number's other records (the "
        "register's mark) are checked; or raise clock.max_forward_ms if that time is real");
  };
  if (auto ok = check("reserved_through_unix_ms", state.reserved_through_unix_ms); !ok) return ok;
  return check("floor_unix_ms", state.floor_unix_ms);
}

}  // namespace snowflake::daemon
