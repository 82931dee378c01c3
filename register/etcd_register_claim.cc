// The etcd register's claim (etcd_register.h, Claim): the fleet record, the restore check,
// the pick policy, the claim transaction, and one ClaimAttempt per call that carries the
// attempts and the policy between them (docs/etcd-fencing.md, "The protocol", steps 1-2,
// and "A restored etcd").

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>

#include "register/etcd_json.h"
#include "register/etcd_register.h"
#include "register/etcd_snapshot.h"
#include "register/machine_lock.h"
#include "snowflake/time_text.h"

namespace snowflake::reg {
namespace {

using etcd::Compare;
using etcd::ErrorKind;
using etcd::Op;

RegisterError Err(RegisterErrorCode code, std::string message) {
  return RegisterError{code, std::move(message)};
}

std::string Range(uint32_t first, uint32_t last) {
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

// How many numbers of [first, last] the snapshot shows held.
size_t HoldersIn(const EtcdSnapshot& snap, uint32_t first, uint32_t last) {
  size_t holders = 0;
  for (const auto& [n, unused] : snap.held) holders += n >= first && n <= last;
  return holders;
}

// The number a claim asks for, and the revision of the holder's own record when it
// retakes one (the transaction then compares it instead of the key's absence).
struct Pick {
  std::optional<uint32_t> machine;
  std::optional<int64_t> retake_revision;
};

// The state file's number, read alone (a snapshot of its two keys): taken if it is ours,
// or free and no other holder remembers it (so a holder restarting elsewhere finds its own
// number still free).
Pick PickPreferred(const EtcdSnapshot& snap, const ClaimRequest& request, uint32_t preferred) {
  const auto held = snap.held.find(preferred);
  if (held != snap.held.end()) {
    if (held->second.record.holder == request.holder_id) {
      return Pick{preferred, held->second.mod_revision};
    }
    return Pick{};
  }
  const auto mark = snap.marks.find(preferred);
  if (mark == snap.marks.end() || mark->second.record.holder.empty() ||
      mark->second.record.holder == request.holder_id) {
    return Pick{preferred, std::nullopt};
  }
  return Pick{};
}

// The pick policy within what a window covers (`covered`: the numbers of [first, last]
// whose keys the window read completely, none locked by another daemon of this host): our
// own held record; else a free number whose last holder was us; else a free number with the
// oldest mark: one with no mark at all (never used, so nobody waits on it) chosen at
// random, so that claimers reading the same window spread out; else the lowest mark (the
// number freed longest ago: a successor waits least, and a recently crashed holder's
// number, whose mark lies ahead of the clock, is left to its holder's restart).
Pick PickInWindow(const EtcdSnapshot& snap, const ClaimRequest& request,
                  const std::vector<uint32_t>& covered, std::mt19937_64& random) {
  for (const uint32_t n : covered) {
    const auto held = snap.held.find(n);
    if (held != snap.held.end() && held->second.record.holder == request.holder_id) {
      return Pick{n, held->second.mod_revision};
    }
  }
  std::vector<uint32_t> fresh;
  std::optional<uint32_t> oldest;
  int64_t oldest_mark = 0;
  for (const uint32_t n : covered) {
    if (snap.held.contains(n)) continue;
    const auto mark = snap.marks.find(n);
    if (mark == snap.marks.end()) {
      fresh.push_back(n);
      continue;
    }
    if (mark->second.record.holder == request.holder_id) return Pick{n, std::nullopt};
    if (!oldest || mark->second.record.unix_ms < oldest_mark) {
      oldest = n;
      oldest_mark = mark->second.record.unix_ms;
    }
  }
  if (!fresh.empty()) return Pick{fresh[random() % fresh.size()], std::nullopt};
  return Pick{oldest, std::nullopt};
}

}  // namespace

// One Claim() call: the attempts, one at a time, and the retry policy between them.
//
// An attempt reads a part of the register, picks a number, takes its host-wide lock and
// sends the claim transaction. The part it reads: on the call's first attempt, the number
// the state file names (its two keys); else a window, the keys of machines/ and
// high-water/ from a random number on, at most options.claim_window of each (wrapping at
// the end of the prefix when fewer than options.claim_window numbers of the range lie at or
// above the start), so a claim costs the same in a fleet of 20 or of 65,536 and
// claimers of one storm look at different numbers; after kEmptyWindows windows with nothing
// free, the whole range, so that kNoFreeNumber is said only of a range read whole. An
// attempt ends in a claim, an error that retrying cannot mend, or a retry:
//   - counted: the number was taken first (the next attempt reads another random window at
//     once), or the transaction went unanswered (the next attempt first pauses 5-24 ms,
//     jittered). After options.max_claim_attempts of these the claim gives up, naming the
//     last reason;
//   - not counted: another daemon of this host holds the number's lock (the number is
//     excluded from every later pick), or a window had nothing free (after kEmptyWindows
//     of these the range is read whole), so these end (at worst in kNoFreeNumber).
// An attempt's read is one read-only transaction (ClaimRead); the first of the call also
// reads the fleet record (created if absent, else compared: kEpochMismatch) and the
// restore fence, and checks that the store is not older than what this host saw
// (CheckNotRolledBack).
class EtcdRegister::ClaimAttempt {
 public:
  ClaimAttempt(EtcdRegister& reg, const ClaimRequest& request, const etcd::FleetRecord& fleet,
               const std::string& fleet_text)
      : reg_(reg),
        request_(request),
        fleet_(fleet),
        fleet_text_(fleet_text),
        first_look_{&fleet, &fleet_text},
        host_lock_dir_(reg.options_.host_lock_dir.empty() ? HostLockDir()
                                                          : reg.options_.host_lock_dir) {}

  // The attempts until one claims, one fails for good, or the counted retries run out.
  tl::expected<MachineClaim, RegisterError> Run() {
    // The call's lease first, before the read: the claim transaction then follows the
    // read at once, so what the read saw is as fresh as it can be when the transaction
    // compares it (granted between the two, in a storm of 1,000 claims, the lease's wait
    // in etcd's queue made the reads stale: more lost races and timeouts, and the storm
    // took 13-24 s instead of 10-15 s).
    if (auto leased = reg_.FreshLease(&lease_used_); !leased) {
      return tl::unexpected(leased.error());
    }
    record_ = etcd::EncodeHolder(etcd::HolderRecord{request_.holder_id, reg_.options_.host,
                                                    static_cast<int64_t>(getpid()),
                                                    reg_.clock().NowUnixMs()});
    // A seed, not a time: the real clock, so that daemons on one test clock still differ.
    jitter_.seed(static_cast<uint32_t>(getpid()) ^
                 static_cast<uint32_t>(Clock::Real().NowUnixMs()));
    // The windows must differ between claimers that start in the same millisecond in one
    // process (a test's fleet): the system's entropy, not the pid and the time.
    random_.seed((uint64_t{std::random_device{}()} << 32) ^ std::random_device{}());
    if (auto known = reg_.KnownBugNotice(); !known.empty()) notices_.push_back(std::move(known));
    while (counted_ < reg_.options_.max_claim_attempts) {
      if (pause_next_) {
        // The last transaction went unanswered: give etcd a moment before asking again.
        // A lost race needs no pause: the next window starts at another random number.
        reg_.clock().SleepFor(std::chrono::milliseconds(5 + jitter_() % 20));
        pause_next_ = false;
      }
      auto claimed = Once();
      if (!claimed) return tl::unexpected(claimed.error());
      if (*claimed) return std::move(**claimed);
    }
    return tl::unexpected(GaveUp());
  }

 private:
  // Windows with nothing free before an attempt reads the whole range.
  static constexpr int kEmptyWindows = 8;

  // One attempt: the claim, nullopt for a retry (RetryCounted or RetryNotCounted said
  // why), or an error.
  tl::expected<std::optional<MachineClaim>, RegisterError> Once() {
    // 1-2. The number to ask for: the state file's, then one from a window of the numbers
    //      (PickPreferred, PickInWindow: the policy and its order).
    auto picked = PickOne();
    if (!picked) return tl::unexpected(picked.error());
    if (!*picked) return std::nullopt;
    const Pick pick = **picked;

    // The host-wide lock of the number, as every backend takes it: a daemon of this
    // host with another register (a static machine = N) must never serve N beside us.
    auto host_lock = AcquireMachineLock(host_lock_dir_, *pick.machine);
    if (!host_lock) {
      if (!host_lock.error().held_by_other) {
        return tl::unexpected(Err(RegisterErrorCode::kUnreadable, host_lock.error().message));
      }
      locked_here_.insert(*pick.machine);
      RetryNotCounted("machine " + std::to_string(*pick.machine) +
                      " is held by another daemon of this host (" +
                      MachineLockPath(host_lock_dir_, *pick.machine).string() + ")");
      return std::nullopt;
    }

    // 3. One transaction: the fleet record unchanged, the number still as we saw it;
    //    then put our record bound to our lease and read the number's mark.
    //    A fresh lease for every attempt that follows one whose transaction was sent (Run
    //    granted the call's first): a claim that went unanswered may still be applied
    //    later, late or out of order, and it would bind its number to the lease it named.
    //    Revoking that lease first makes etcd refuse such a late put ("requested lease not
    //    found"), so it can never bind a second number to the lease this holder keeps
    //    alive; it also frees a record that attempt committed without hearing the answer.
    if (auto leased = reg_.FreshLease(&lease_used_); !leased) {
      return tl::unexpected(leased.error());
    }
    lease_used_ = true;
    auto txn = reg_.CommitClaim(*pick.machine, pick.retake_revision, fleet_, fleet_text_, record_);
    if (!txn) return tl::unexpected(txn.error());
    // An answered transaction can never apply later: its lease may serve the next attempt.
    if (txn->answered) lease_used_ = false;
    if (!txn->claimed) {
      RetryCounted(txn->retry_reason, txn->outage);
      return std::nullopt;
    }
    return reg_.Adopt(*pick.machine, std::move(*host_lock), request_.holder_id, *txn,
                      std::move(notices_));
  }

  // The number this attempt asks for; nullopt: look again (a window with nothing free,
  // RetryNotCounted); kNoFreeNumber once a read of the whole range found nothing free.
  // The first read of the call also checks that the store is not older than what this
  // host saw (CheckNotRolledBack).
  tl::expected<std::optional<Pick>, RegisterError> PickOne() {
    const uint32_t first = reg_.options_.first_machine;
    const uint32_t last = reg_.options_.last_machine;
    const auto usable = [&](uint32_t n) {
      return n >= first && n <= last && !locked_here_.contains(n);
    };
    // The state file's number, once per call: a restart gets its own number back.
    if (const auto preferred = request_.preferred_machine;
        !preferred_tried_ && preferred && usable(*preferred)) {
      preferred_tried_ = true;
      auto read = reg_.ReadNumber(*preferred, request_, Look(), notices_);
      looked_ = true;
      if (!read) return tl::unexpected(read.error());
      if (const Pick pick = PickPreferred(*read, request_, *preferred); pick.machine) return pick;
    }
    // A window from a random number, or the whole range after kEmptyWindows windows that
    // had nothing free (then a pick that fails proves the range full).
    const bool whole = empty_windows_ >= kEmptyWindows;
    const uint32_t start = first + static_cast<uint32_t>(random_() % (uint64_t{last} - first + 1));
    auto window = reg_.ReadWindow(start, whole, locked_here_, request_, Look(), notices_);
    looked_ = true;
    if (!window) return tl::unexpected(window.error());
    std::vector<uint32_t> covered;
    for (const uint32_t n : window->covered) {
      if (usable(n)) covered.push_back(n);
    }
    if (const Pick pick = PickInWindow(window->snap, request_, covered, random_); pick.machine) {
      return pick;
    }
    if (window->whole) {
      return tl::unexpected(reg_.NoFreeNumber(
          HoldersIn(window->snap, first, last), window->snap.held.size(), locked_here_,
          host_lock_dir_, etcd::MachinesPrefix(reg_.options_.prefix)));
    }
    ++empty_windows_;
    RetryNotCounted("no free number among the " + std::to_string(covered.size()) +
                    " numbers of a window from " + std::to_string(start));
    return std::optional<Pick>{};
  }

  // What this attempt's read checks besides the keys it asks for: on the call's first
  // read, the fleet record and the store's age; none after.
  const EtcdRegister::FirstLook* Look() const { return looked_ ? nullptr : &first_look_; }

  // The retry policy's two outcomes (see the class comment).
  void RetryCounted(std::string reason, bool outage) {
    last_failure_ = std::move(reason);
    last_failure_was_outage_ = outage;
    pause_next_ = outage;
    ++counted_;
  }
  void RetryNotCounted(std::string reason) {
    last_failure_ = std::move(reason);
    last_failure_was_outage_ = false;
  }

  // The counted retries ran out: kUnreachable if the last was an unanswered transaction.
  RegisterError GaveUp() const {
    const EtcdRegisterOptions& options = reg_.options_;
    return Err(
        last_failure_was_outage_ ? RegisterErrorCode::kUnreachable : RegisterErrorCode::kUnreadable,
        "gave up claiming a machine number in " +
            Range(options.first_machine, options.last_machine) + " in the etcd register (" +
            reg_.location() + ") after " + std::to_string(options.max_claim_attempts) +
            " attempts; the last: " + last_failure_);
  }

  // Constant for the call.
  EtcdRegister& reg_;
  const ClaimRequest& request_;
  const etcd::FleetRecord& fleet_;
  const std::string& fleet_text_;
  const EtcdRegister::FirstLook first_look_;
  const std::filesystem::path host_lock_dir_;

  // Set once by Run(), before the first attempt.
  std::string record_;  // our holder record, as every attempt puts it
  std::minstd_rand jitter_;
  std::mt19937_64 random_;  // the windows' starts and the choice among fresh numbers

  // Carried from attempt to attempt.
  int counted_ = 0;                 // counted retries so far
  bool lease_used_ = true;          // lease_ is not this call's, or a sent transaction named it
  std::set<uint32_t> locked_here_;  // numbers other daemons of this host hold
  bool looked_ = false;             // the store's age was checked (the first read)
  bool preferred_tried_ = false;    // the state file's number was read
  int empty_windows_ = 0;           // windows that had no free number
  std::vector<std::string> notices_;
  std::string last_failure_;
  bool last_failure_was_outage_ = false;
  bool pause_next_ = false;  // the next attempt first pauses (after an unanswered one)
};

tl::expected<MachineClaim, RegisterError> EtcdRegister::Claim(
    const ClaimRequest& request) noexcept {
  try {
    if (auto checked = CheckClaimRequest(request); !checked) return tl::unexpected(checked.error());
    const etcd::FleetRecord fleet{request.epoch_unix_ms, IdBitsRecordName(options_.id_bits)};
    const std::string fleet_text = etcd::EncodeFleet(fleet);
    return ClaimAttempt(*this, request, fleet, fleet_text).Run();
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

tl::expected<void, RegisterError> EtcdRegister::CheckClaimRequest(
    const ClaimRequest& request) const {
  if (!options_.setup_error.empty()) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, options_.setup_error));
  }
  if (machine_) return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest, "already claimed"));
  if (request.holder_id.empty()) {
    return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest, "empty holder id"));
  }
  if (options_.first_machine > options_.last_machine ||
      options_.last_machine > options_.id_bits.max_machine()) {
    return tl::unexpected(
        Err(RegisterErrorCode::kInvalidRequest,
            "bad machine range " + Range(options_.first_machine, options_.last_machine)));
  }
  return {};
}

RegisterError EtcdRegister::NoFreeNumber(size_t holders_in_range, size_t held_under_prefix,
                                         const std::set<uint32_t>& locked_here,
                                         const std::filesystem::path& host_lock_dir,
                                         const std::string& machines_prefix) const {
  return Err(RegisterErrorCode::kNoFreeNumber,
             "no free machine number in " + Range(options_.first_machine, options_.last_machine) +
                 " in the etcd register (" + location() + "): all " +
                 std::to_string(options_.last_machine - options_.first_machine + 1) +
                 " are held (" + std::to_string(holders_in_range) + " holders in range, " +
                 std::to_string(held_under_prefix) + " under " + machines_prefix +
                 (locked_here.empty() ? std::string()
                                      : ", " + std::to_string(locked_here.size()) +
                                            " more held by other daemons of this host (" +
                                            host_lock_dir.string() + ")") +
                 "); widen register.machines or stop a daemon of another host");
}

tl::expected<void, RegisterError> EtcdRegister::FreshLease(bool* lease_used) {
  if (!*lease_used) return {};
  if (lease_ != 0) {
    (void)client_.Revoke(lease_);
    lease_ = 0;
  }
  // Before the request, on the register's steady clock as the keepalive reads it: etcd
  // counts the TTL from its own grant, which comes after this.
  const auto asked = clock().SteadyNow();
  auto grant = client_.GrantLease(options_.lease_ttl_s);
  if (!grant) return tl::unexpected(Failure("cannot grant a lease", grant.error()));
  lease_ = grant->id;
  lease_granted_ = asked;
  *lease_used = false;
  return {};
}

tl::expected<etcd::TxnResult, RegisterError> EtcdRegister::ClaimRead(
    std::vector<etcd::Op> ops, const std::string& what, const ClaimRequest& request,
    const FirstLook* first, std::vector<std::string>& notices) {
  // A transaction of range operations only: etcd serves it linearizably (ReadIndex)
  // without a raft entry, like a range, and every key it reads is of one revision.
  const size_t asked = ops.size();
  etcd::TxnRequest txn;
  txn.success = std::move(ops);
  if (first != nullptr) {
    txn.success.push_back(Op::Get(etcd::ConfigKey(options_.prefix)));
    txn.success.push_back(Op::Get(etcd::RestoreKey(options_.prefix)));
  }
  auto result = client_.Txn(txn);
  if (!result) return tl::unexpected(Failure("cannot read " + what, result.error()));
  if (!result->succeeded || result->responses.size() != txn.success.size()) {
    return tl::unexpected(Err(RegisterErrorCode::kCorrupt,
                              "a read of " + what + " answered with " +
                                  std::to_string(result->responses.size()) + " results, not " +
                                  std::to_string(txn.success.size())));
  }
  NoteIdentity(result->cluster_id, result->revision);
  if (first == nullptr) return std::move(*result);
  const etcd::RangeResult& config = result->responses[asked].range;
  std::optional<std::string> stored;
  if (!config.kvs.empty()) stored = config.kvs[0].value;
  if (auto ok = SettleFleet(*first->fleet, *first->fleet_text, std::move(stored)); !ok) {
    return tl::unexpected(ok.error());
  }
  etcd::RangeResult answer;
  answer.cluster_id = result->cluster_id;
  answer.revision = result->revision;
  if (auto checked =
          CheckNotRolledBack(request, answer, result->responses[asked + 1].range, notices);
      !checked) {
    return tl::unexpected(checked.error());
  }
  result->responses.resize(asked);
  return std::move(*result);
}

tl::expected<EtcdSnapshot, RegisterError> EtcdRegister::ReadNumber(
    uint32_t machine, const ClaimRequest& request, const FirstLook* first,
    std::vector<std::string>& notices) {
  auto result = ClaimRead({Op::Get(etcd::MachineKey(options_.prefix, machine)),
                           Op::Get(etcd::HighWaterKey(options_.prefix, machine))},
                          "machine " + std::to_string(machine), request, first, notices);
  if (!result) return tl::unexpected(result.error());
  return DecodeSnapshot(options_.prefix, result->responses[0].range, result->responses[1].range);
}

tl::expected<EtcdRegister::ClaimWindow, RegisterError> EtcdRegister::ReadWindow(
    uint32_t start, bool whole, const std::set<uint32_t>& locked_here, const ClaimRequest& request,
    const FirstLook* first, std::vector<std::string>& notices) {
  const std::string machines_prefix = etcd::MachinesPrefix(options_.prefix);
  const std::string marks_prefix = etcd::HighWaterPrefix(options_.prefix);
  const std::string start_tail = std::to_string(start);
  ClaimWindow window;
  // The keys read lie in stretches of key order (the tails after the prefix, "17" < "2"):
  // [start, end1] and, when that reached the end of the prefix, wrapping, ["", end2] below
  // start. A stretch ends at the last key of a range that stopped at its limit (beyond it
  // the other range's keys are known, the holders not all); nullopt: it reached the end.
  struct Stretch {
    std::string from;
    std::optional<std::string> to;     // inclusive; nullopt: up to `below` or the end
    std::optional<std::string> below;  // exclusive bound (the wrapped stretch: start)
  };
  std::vector<Stretch> stretches;
  etcd::RangeResult held_all;
  etcd::RangeResult marks_all;
  const int64_t limit = whole ? 0 : options_.claim_window;
  // One stretch: a window's is one read (ClaimRead, the first look's checks included); the
  // whole range's is paged (RangeAll), after the first look's checks read alone.
  const auto read = [&](const std::string& from, const std::optional<std::string>& below,
                        const FirstLook* look,
                        std::optional<std::string>* to) -> tl::expected<void, RegisterError> {
    const std::string held_end =
        below ? machines_prefix + *below : etcd::PrefixEnd(machines_prefix);
    const std::string marks_end = below ? marks_prefix + *below : etcd::PrefixEnd(marks_prefix);
    std::optional<etcd::RangeResult> held;
    std::optional<etcd::RangeResult> marks;
    if (whole) {
      if (look != nullptr) {
        if (auto checked = ClaimRead({}, options_.prefix, request, look, notices); !checked) {
          return tl::unexpected(checked.error());
        }
      }
      auto held_pages = RangeAll(machines_prefix + from, held_end);
      if (!held_pages) return tl::unexpected(held_pages.error());
      auto marks_pages = RangeAll(marks_prefix + from, marks_end);
      if (!marks_pages) return tl::unexpected(marks_pages.error());
      NoteIdentity(held_pages->cluster_id, held_pages->revision);
      held = std::move(*held_pages);
      marks = std::move(*marks_pages);
    } else {
      auto answer = ClaimRead({Op::Get(machines_prefix + from, held_end, limit),
                               Op::Get(marks_prefix + from, marks_end, limit)},
                              "the window from " + machines_prefix + from, request, look, notices);
      if (!answer) return tl::unexpected(answer.error());
      held = std::move(answer->responses[0].range);
      held->cluster_id = answer->cluster_id;
      held->revision = answer->revision;
      marks = std::move(answer->responses[1].range);
    }
    if (held_all.cluster_id == 0) {
      held_all.cluster_id = held->cluster_id;
      held_all.revision = held->revision;
    }
    *to = std::nullopt;
    const auto stop_at = [&](const etcd::RangeResult& r, const std::string& prefix) {
      if (!r.more || r.kvs.empty()) return;
      std::string tail = r.kvs.back().key.substr(prefix.size());
      if (!*to || tail < **to) *to = std::move(tail);
    };
    stop_at(*held, machines_prefix);
    stop_at(*marks, marks_prefix);
    for (auto& kv : held->kvs) held_all.kvs.push_back(std::move(kv));
    for (auto& kv : marks->kvs) marks_all.kvs.push_back(std::move(kv));
    return {};
  };
  Stretch upper{start_tail, std::nullopt, std::nullopt};
  if (auto ok = read(upper.from, std::nullopt, first, &upper.to); !ok) {
    return tl::unexpected(ok.error());
  }
  stretches.push_back(upper);
  // The numbers of the range (none locked here) whose keys lie at or above the start: what
  // a stretch that reached the end of the prefix covers.
  const auto above_start = [&] {
    int64_t count = 0;
    char digits[16];
    for (uint32_t n = options_.first_machine; n <= options_.last_machine; ++n) {
      const auto end = std::to_chars(digits, digits + sizeof(digits), n).ptr;
      count += !locked_here.contains(n) &&
               std::string_view(digits, static_cast<size_t>(end - digits)) >= start_tail;
    }
    return count;
  };
  if (!upper.to && (whole || above_start() < options_.claim_window)) {
    // Reached the end of the prefix, having covered fewer numbers than a window's worth
    // (or reading the whole range): wrap to its beginning, up to the start. A window that
    // covers enough above the start is not widened: one read is all it costs.
    Stretch lower{"", std::nullopt, start_tail};
    if (auto ok = read(lower.from, lower.below, nullptr, &lower.to); !ok) {
      return tl::unexpected(ok.error());
    }
    stretches.push_back(lower);
    window.whole = !lower.to;
  }
  // Keys beyond a stretch's end are dropped: a mark there says nothing of its holder.
  const auto covers = [&](std::string_view tail) {
    for (const Stretch& s : stretches) {
      if (tail >= s.from && (!s.to || tail <= *s.to) && (!s.below || tail < *s.below)) return true;
    }
    return false;
  };
  const auto keep = [&](etcd::RangeResult& r, const std::string& prefix) {
    std::erase_if(r.kvs, [&](const etcd::KeyValue& kv) {
      return kv.key.size() < prefix.size() ||
             !covers(std::string_view(kv.key).substr(prefix.size()));
    });
  };
  keep(held_all, machines_prefix);
  keep(marks_all, marks_prefix);
  auto snap = DecodeSnapshot(options_.prefix, held_all, marks_all);
  if (!snap) return tl::unexpected(snap.error());
  window.snap = std::move(*snap);
  char text[16];
  for (uint32_t n = options_.first_machine; n <= options_.last_machine; ++n) {
    if (locked_here.contains(n)) continue;
    const auto end = std::to_chars(text, text + sizeof(text), n).ptr;
    if (covers(std::string_view(text, static_cast<size_t>(end - text))))
      window.covered.push_back(n);
  }
  return window;
}

tl::expected<void, RegisterError> EtcdRegister::EnsureFleet(
    const etcd::FleetRecord& fleet, const std::string& fleet_text) noexcept {
  auto read = client_.Range(etcd::ConfigKey(options_.prefix));
  if (!read) return tl::unexpected(Failure("cannot check the fleet record", read.error()));
  std::optional<std::string> stored;
  if (!read->kvs.empty()) stored = std::move(read->kvs[0].value);
  return SettleFleet(fleet, fleet_text, std::move(stored));
}

tl::expected<void, RegisterError> EtcdRegister::SettleFleet(const etcd::FleetRecord& fleet,
                                                            const std::string& fleet_text,
                                                            std::optional<std::string> stored) {
  const std::string key = etcd::ConfigKey(options_.prefix);
  // Read linearizably (a claim's first read, or EnsureFleet): a storm of claims on an
  // existing fleet writes nothing here. Only an absent record is created, by a transaction
  // that puts it if still absent (else reads it). Either way the claim transaction compares
  // it byte for byte, so it cannot change between here and the claim.
  if (!stored) {
    etcd::TxnRequest txn;
    txn.compare = {Compare::KeyAbsent(key)};
    txn.success = {Op::Put(key, fleet_text)};
    txn.failure = {Op::Get(key)};
    auto result = client_.Txn(txn);
    if (!result) return tl::unexpected(Failure("cannot check the fleet record", result.error()));
    if (result->succeeded) return {};
    if (result->responses.size() != 1 || result->responses[0].range.kvs.empty()) {
      // Deleted between the comparison and the read: cannot happen in one transaction.
      return tl::unexpected(Err(RegisterErrorCode::kCorrupt,
                                "the fleet record " + key + " vanished inside a transaction"));
    }
    stored = std::move(result->responses[0].range.kvs[0].value);
  }
  if (*stored == fleet_text) return {};
  auto decoded = DecodeFleetAt(key, *stored);
  if (!decoded) return tl::unexpected(decoded.error());
  return tl::unexpected(
      Err(RegisterErrorCode::kEpochMismatch,
          "the etcd register " + key + " belongs to a fleet with " + etcd::DescribeFleet(*decoded) +
              ", but this daemon has " + etcd::DescribeFleet(fleet) +
              ": set id.epoch and id.layout to the fleet's, or use another register.etcd.prefix "
              "for a new fleet"));
}

std::string EtcdRegister::KnownBugNotice() noexcept {
  // Once per register: a daemon that waits for etcd calls Claim() again on the same one.
  if (known_bug_notice_) return *known_bug_notice_;
  auto status = client_.Status();
  if (!status) return {};  // the claim that follows reports an outage itself
  NoteIdentity(status->cluster_id, status->revision);
  known_bug_notice_.emplace();
  int major = 0, minor = 0, patch = 0;
  if (std::sscanf(status->version.c_str(), "%d.%d.%d", &major, &minor, &patch) != 3) return {};
  // etcd-io/etcd#15247: a leader that stalls (SIGSTOP, a slow disk) and resumes after a
  // lease's TTL revokes leases the other members kept alive. Fixed on the 3.4 and 3.5
  // branches in early 2024. With the mark compared by revision this costs availability
  // (a live holder loses its claim, exits and claims anew), never a duplicate.
  const bool affected = major < 3 || (major == 3 && minor < 4) ||
                        (major == 3 && minor == 4 && patch < 31) ||
                        (major == 3 && minor == 5 && patch < 13);
  if (!affected) return {};
  *known_bug_notice_ =
      "etcd " + status->version + " at " + client_.current_endpoint() +
      " revokes live leases after a stalled leader resumes (etcd-io/etcd#15247, fixed in "
      "3.4.31 and 3.5.13): a daemon may then lose its number, exit and claim anew. IDs stay "
      "unique; upgrade etcd to stop the restarts";
  return *known_bug_notice_;
}

tl::expected<void, RegisterError> EtcdRegister::CheckNotRolledBack(
    const ClaimRequest& request, const etcd::RangeResult& answer, const etcd::RangeResult& fence,
    std::vector<std::string>& notices) noexcept {
  const RegisterIdentity& seen = request.last_seen;
  // The operators' restore fence as the store held it at `answer`'s revision (the same
  // read): its revision is what this host records, so that only a newer fence can admit
  // it past a later restore.
  const std::string restore_key = etcd::RestoreKey(options_.prefix);
  const int64_t fence_revision = fence.kvs.empty() ? 0 : fence.kvs[0].mod_revision;
  identity_.fence_revision = fence_revision;
  if (seen.cluster_id == 0) return {};  // nothing recorded: a first start on this host
  const bool other_cluster = answer.cluster_id != seen.cluster_id;
  const bool older = answer.revision < seen.revision;
  if (!other_cluster && !older) return {};
  const std::string what =
      other_cluster
          ? "answers as cluster " + std::to_string(answer.cluster_id) +
                ", but this host last saw cluster " + std::to_string(seen.cluster_id)
          : "is at revision " + std::to_string(answer.revision) + ", below the revision " +
                std::to_string(seen.revision) + " this host already saw";
  // An operator who fenced this restore above every ID this host may have issued lets it
  // in. The fence must be newer than any this host saw of the same cluster: a fence the
  // host saw was written before the host last used the store, so it answers an earlier
  // restore, not this one (a snapshot taken after it carries it along). A cluster the host
  // never saw (a replaced one) has only fences written after the host last looked.
  std::string stale_fence;
  if (!fence.kvs.empty()) {
    auto record = DecodeRestoreAt(restore_key, fence.kvs[0].value);
    if (!record) return tl::unexpected(record.error());
    const bool answers_this_restore = other_cluster ? record->cluster_id == answer.cluster_id
                                                    : fence_revision > seen.fence_revision;
    if (!answers_this_restore) {
      stale_fence = "; the fence " + restore_key + " (revision " + std::to_string(fence_revision) +
                    ") is one this host already saw before the store went back, so it answers "
                    "an earlier restore, not this one";
    }
    if (answers_this_restore && record->cluster_id == answer.cluster_id &&
        record->above_unix_ms >= request.local_high_water_ms) {
      notices.push_back("the etcd register (" + location() + ") " + what +
                        "; an operator raised every mark to " +
                        FormatTimeText(record->above_unix_ms) + " (" + restore_key +
                        "), above every ID this host may have issued (" +
                        FormatTimeText(request.local_high_water_ms) + "): continuing");
      return {};
    }
  }
  return tl::unexpected(
      Err(RegisterErrorCode::kRolledBack,
          "the etcd register (" + location() + ") " + what + stale_fence +
              ": it was restored from a backup or replaced, so its high-water marks may be older "
              "than IDs already issued, and a number claimed from it could repeat them. Stop "
              "every daemon of the fleet, then run `snowflakectl register raise-all --above TIME` "
              "with TIME at or past the newest ID any of them may have issued (this host's: " +
              FormatTimeText(request.local_high_water_ms) +
              "; the current time is safe if no clock ran ahead), and start them again"));
}

tl::expected<EtcdRegister::ClaimTxn, RegisterError> EtcdRegister::CommitClaim(
    uint32_t machine, std::optional<int64_t> retake_revision, const etcd::FleetRecord& fleet,
    const std::string& fleet_text, const std::string& record) {
  const std::string machine_key = etcd::MachineKey(options_.prefix, machine);
  const std::string mark_key = etcd::HighWaterKey(options_.prefix, machine);
  etcd::TxnRequest txn;
  txn.compare = {Compare::ValueEquals(etcd::ConfigKey(options_.prefix), fleet_text),
                 retake_revision
                     ? Compare::ModRevision(machine_key, Compare::Result::kEqual, *retake_revision)
                     : Compare::KeyAbsent(machine_key)};
  txn.success = {Op::Put(machine_key, record, lease_), Op::Get(mark_key)};
  txn.failure = {Op::Get(etcd::ConfigKey(options_.prefix))};
  auto result = client_.Txn(txn);
  if (!result) {
    if (result.error().kind == ErrorKind::kUnavailable) {
      // Maybe applied: the next listing shows our record if it was, and we retake it.
      ClaimTxn retry;
      retry.retry_reason = result.error().message;
      retry.outage = true;
      return retry;
    }
    if (result.error().kind == ErrorKind::kRejected && result.error().grpc_code == 5) {
      // "requested lease not found": our lease expired between the grant and the claim (a
      // loaded host, a long election). Nothing was written; the next attempt takes a new
      // lease.
      ClaimTxn retry;
      retry.retry_reason = result.error().message;
      return retry;
    }
    return tl::unexpected(
        Failure("cannot claim machine " + std::to_string(machine), result.error()));
  }
  // Answered: this transaction is decided and can never apply later.
  if (!result->succeeded) {
    const auto& fail = result->responses;
    if (fail.size() == 1 &&
        (fail[0].range.kvs.empty() || fail[0].range.kvs[0].value != fleet_text)) {
      // The fleet record changed under us: report it as EnsureFleet would.
      if (auto ok = EnsureFleet(fleet, fleet_text); !ok) return tl::unexpected(ok.error());
    }
    ClaimTxn lost;
    lost.answered = true;
    lost.retry_reason = "machine " + std::to_string(machine) + " was taken by another daemon first";
    return lost;
  }
  if (result->responses.size() != 2) {
    return tl::unexpected(Err(RegisterErrorCode::kCorrupt,
                              "a claim transaction answered with " +
                                  std::to_string(result->responses.size()) + " results, not 2"));
  }
  NoteIdentity(result->cluster_id, result->revision);
  ClaimTxn claimed;
  claimed.answered = true;
  claimed.claimed = true;
  const auto& mark_kvs = result->responses[1].range.kvs;
  if (!mark_kvs.empty()) {
    auto rec = DecodeMarkAt(mark_key, mark_kvs[0].value);
    if (!rec) return tl::unexpected(rec.error());
    claimed.mark = rec->unix_ms;
    claimed.mark_writer = rec->lease;
    claimed.mark_revision = mark_kvs[0].mod_revision;
  }
  return claimed;
}

MachineClaim EtcdRegister::Adopt(uint32_t machine, util::FileLock host_lock,
                                 const std::string& holder_id, const ClaimTxn& txn,
                                 std::vector<std::string> notices) {
  machine_ = machine;
  machine_lock_ = std::move(host_lock);
  holder_id_ = holder_id;
  claim_mark_ = committed_ = attempted_max_ = mark_value_ = txn.mark;
  mark_revision_ = txn.mark_revision;
  keepalive_.Start(lease_, machine, lease_granted_);
  return MachineClaim{.machine = machine,
                      .high_water_unix_ms = txn.mark,
                      .mark_writer = txn.mark_writer,
                      .claim_token = lease_,
                      .notices = std::move(notices)};
}

}  // namespace snowflake::reg
