// The "etcd" register backend: machine numbers for a fleet, kept in a real etcd cluster
// (v3 API through its JSON gateway, etcd_client.h), fenced by a high-water mark per
// number (docs/etcd-fencing.md has the argument step by step; etcd_records.h the keys).
//
// - Claim: the fleet record (epoch and layout) is created once and compared in the same
//   transaction that puts machines/N if absent, bound to this daemon's lease, and reads
//   high-water/N. A holder gets its own number back, also while its old lease is alive.
// - UpdateHighWater: raises high-water/N in a transaction that compares this daemon's lease
//   on machines/N and the mark's mod_revision as this daemon last saw it, so a request that
//   etcd applies late, twice or after later ones can never lower the mark. Only a committed
//   transaction counts: a timeout is reported as an error (not committed). A failed lease
//   comparison means the claim is gone: kClaimLost, for good; a moved mark is re-read. A
//   mark an operator wrote (a fence) ends the call without a write (kFenced): the daemon
//   records the fence on its host before any write under its lease covers it.
// - Claim also takes the number's host-wide lock (machine_lock.h), as every backend does,
//   and refuses a store older than the one this host saw (a restore from a backup).
// - A keepalive thread renews the lease every lease_ttl_s / 3 (etcd_keepalive.h); a lease
//   that is gone makes every later call fail with kClaimLost.
//
// The class is one interface over several files, one per job: the claim
// (etcd_register_claim.cc), the marks and fences (etcd_register_marks.cc), the operator's
// commands (etcd_register_commands.cc), the keepalive (etcd_keepalive.h) and the decode of
// what the register reads (etcd_snapshot.h); etcd_register.cc holds what they share.
//
// Thread-safety: Claim, UpdateHighWater, RecordCleanStop, List and Release must be called
// from one thread at a time; claim_lost() and lease_status() may be called from any thread.
// The keepalive thread uses its own connection.

#ifndef SNOWFLAKE_REGISTER_ETCD_REGISTER_H_
#define SNOWFLAKE_REGISTER_ETCD_REGISTER_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "register/etcd_client.h"
#include "register/etcd_keepalive.h"
#include "register/etcd_records.h"
#include "register/etcd_register_config.h"
#include "register/etcd_snapshot.h"
#include "register/machine_register.h"
#include "snowflake/clock.h"
#include "snowflake/id_layout.h"
#include "util/file_lock.h"

namespace snowflake::reg {

struct EtcdRegisterOptions {
  etcd::ClientOptions client;
  std::string prefix = "/snowflaked/";
  int64_t lease_ttl_s = 10;
  uint32_t first_machine = 0;  // numbers this daemon may claim: first..last
  uint32_t last_machine = kDefaultIdBits.max_machine();
  // id.layout: recorded in the fleet record (P config) by the first claim; a claim under
  // another layout is refused (kEpochMismatch). Bounds every number (and raise-all's walk).
  IdBits id_bits = kDefaultIdBits;
  std::string host;  // recorded with the claim; empty: gethostname()
  // Where the host-wide machine locks are (machine_lock.h); empty: HostLockDir().
  std::filesystem::path host_lock_dir;
  // Claim gives up after this many lost races or unanswered attempts.
  int max_claim_attempts = 64;
  // Keys of machines/ and of high-water/ one claim attempt reads from a random number on
  // (a window, etcd_register_claim.cc); at least 1.
  int64_t claim_window = 64;
  // register.etcd.mark_reservation_ms: how far ahead of the clock the daemon reserves in
  // the mark (mark_reservation_ms()); 0: only persistence.reservation_ms.
  int64_t mark_reservation_ms = 0;
  // RaiseAll(..., while_running = true) waits this long for every running holder to
  // acknowledge the fence before it reports the ones that did not.
  std::chrono::milliseconds fence_ack_timeout{30'000};
  // Set when the options could not be completed (an unreadable password file): Claim
  // then fails with kUnreadable and this message.
  std::string setup_error;
  // A sync point (as RocksDB's TEST_SYNC_POINT): called by RaiseAll between its listing
  // and its first write, so a test can put a claim exactly there. Empty in production.
  std::function<void()> after_raise_all_listing;
  // The clock of the times recorded in etcd (a claim's, a restore fence's), of the pause
  // between claim attempts and of RaiseAll's wait for acknowledgements (not owned; it
  // must outlive the register). Null: the real one. An HTTP request's timeout and the
  // keepalive's period stay real time.
  Clock* clock = &Clock::Real();
};

// The options config asks for ([register.etcd], register.machines); reads
// register.etcd.password_file, reporting a failure through setup_error.
EtcdRegisterOptions EtcdRegisterOptionsFrom(const EtcdRegisterConfig& etcd,
                                            const RegisterCommon& common);
// An EtcdRegister with those options (not connected until used).
std::unique_ptr<MachineRegister> MakeEtcdRegister(const EtcdRegisterConfig& own,
                                                  const RegisterCommon& common);

// One number as `snowflakectl register list` shows it.
struct EtcdRegisterEntry {
  uint32_t machine = 0;
  std::optional<etcd::HolderRecord> holder;  // present = held
  int64_t lease = 0;
  int64_t holder_revision = 0;    // the holder record's mod_revision (0: no record)
  int64_t lease_ttl_left_s = -1;  // -1: no lease, or the lease is gone
  std::optional<etcd::HighWaterRecord> high_water;
  int64_t high_water_revision = 0;  // the mark's mod_revision (0: no mark)
  // A running daemon holds the number (its lease is alive).
  bool live() const { return holder.has_value() && lease_ttl_left_s >= 0; }
};

class EtcdRegister final : public MachineRegister {
 public:
  // How often a write retries after the mark moved under it before it reports an error.
  static constexpr int kRaiseRounds = 4;
  // Keys one page of a whole-prefix read holds (RangeAll): a claim that must prove the
  // range full, `register list`, raise-all.
  static constexpr int64_t kListPage = 1000;
  // Marks RaiseAll writes in one transaction (etcd refuses more than --max-txn-ops, 128 by
  // default, operations in one branch).
  static constexpr size_t kRaiseAllBatch = 64;

  explicit EtcdRegister(EtcdRegisterOptions options);
  // Stops the keepalive thread and revokes the lease (best effort), so the number is free
  // at once; its high-water mark stays.
  ~EtcdRegister() override;

  // Errors: kInvalidRequest (empty holder id, an empty range), kEpochMismatch (the fleet
  // record names another epoch or layout: both are in the message), kNoFreeNumber (every
  // number of the range is held: the range and the holder count are in the message),
  // kCorrupt (a value under the prefix is not ours: the key is named), kUnreachable (etcd
  // did not answer or has no quorum: nothing is claimed, call Claim() again later; each
  // call starts with a fresh lease), kUnreadable (etcd refused: bad credentials, TLS, a
  // setup error; the message has the reason and what to check).
  tl::expected<MachineClaim, RegisterError> Claim(const ClaimRequest& request) noexcept override;
  // Raises high-water/N to max(unix_ms, every earlier attempt). Returns success only if
  // the transaction committed, or the stored mark already covers unix_ms. Errors:
  // kNotClaimed, kClaimLost (the number is no longer ours: stop serving now and exit),
  // kUnreachable (no answer in time, no quorum: NOT committed; the previous horizon still
  // holds), kUnreadable (etcd refused: NOT committed), kFenced (an operator's mark below
  // unix_ms was found and nothing written: record fence_unix_ms() durably, then call
  // again; the same holds for RecordCleanStop and AcknowledgeFence).
  tl::expected<void, RegisterError> UpdateHighWater(int64_t unix_ms) noexcept override;
  // Records max(last_issued, the mark this claim started above, every fence an operator
  // put on it since), under the same lease comparison: the only write that may lower the
  // mark, and only down to what this holder really issued, never below a value another
  // writer put there. Errors as UpdateHighWater.
  tl::expected<void, RegisterError> RecordCleanStop(int64_t last_issued_unix_ms) noexcept override;
  // The highest mark an operator (a write under another lease than ours: `raise-all`) put
  // on our number since the claim, as the raises' re-reads found it; 0: none.
  int64_t fence_unix_ms() const noexcept override { return fence_ms_; }
  // Writes the mark again under our lease, never lower, recording `fence_unix_ms` as
  // acknowledged (HighWaterRecord::fence): what `raise-all --while-running` waits for.
  // Nothing is written when a newer fence arrived meanwhile (fence_unix_ms() then tells).
  // Errors as UpdateHighWater.
  tl::expected<void, RegisterError> AcknowledgeFence(int64_t fence_unix_ms) noexcept override;
  // The keepalive runs on its own thread; this only reports what it found. Errors:
  // kClaimLost once the lease is known to be gone (stop serving at once).
  tl::expected<void, RegisterError> Renew() noexcept override;
  std::string_view backend_name() const noexcept override { return "etcd"; }
  // options.mark_reservation_ms (register.etcd.mark_reservation_ms).
  int64_t mark_reservation_ms() const noexcept override { return options_.mark_reservation_ms; }
  // options.clock, or the real one.
  Clock& clock() const noexcept {
    return options_.clock != nullptr ? *options_.clock : Clock::Real();
  }
  RegisterIdentity identity() const noexcept override { return identity_; }
  // "etcd http://a:2379,http://b:2379 /snowflaked/".
  std::string location() const override;

  // Set (for good) once the claim is known to be gone: the keepalive found the lease gone
  // or a raise's comparison failed.
  bool claim_lost() const noexcept { return keepalive_.lost(); }
  // The lease of the claim (0 before Claim).
  int64_t lease() const noexcept { return lease_; }

  // For `snowflakectl register list/show`: every number with a holder or a mark,
  // ascending. Errors: kCorrupt, kUnreachable, kUnreadable.
  tl::expected<std::vector<EtcdRegisterEntry>, RegisterError> List() noexcept;
  // For `snowflakectl register release N`: removes a holder record whose lease is gone or
  // that has no lease, and forgets the last holder recorded with the mark (so that holder
  // no longer prefers N). Never touches the mark itself. Errors: kInUse (a live lease holds
  // N), kInvalidRequest (N has no holder and no mark), kCorrupt, kUnreachable, kUnreadable.
  tl::expected<void, RegisterError> Release(uint32_t machine) noexcept override;
  // List() as the operator sees it: holder, host, lease left, mark.
  tl::expected<std::vector<RegisterListEntry>, RegisterError> ListNumbers() noexcept override;
  // For `snowflakectl register raise-all`, after etcd was restored from a backup: raises
  // the mark of every number of the layout (options' id_bits) to at least above_unix_ms
  // (creating absent ones; never lowering one), then records the fence under P restored with the
  // cluster's id, which lets daemons that saw the store before the restore start again. Returns how
  // many marks it raised. Refused while a live lease holds a number, unless `while_running`: then
  // every held number's mark is written (also one already above), so its holder's next
  // raise finds the fence, and RaiseAll waits (options.fence_ack_timeout) until each holder
  // acknowledged it or its claim ended; those whose claim ended first are named in the
  // result's ended_unacknowledged. Errors: kInUse (a number is held and not
  // `while_running`: each holder and host is named; a mark kept changing; a holder did not
  // acknowledge in time: it is named), kCorrupt, kUnreachable, kUnreadable.
  tl::expected<RaiseAllResult, RegisterError> RaiseAll(int64_t above_unix_ms,
                                                       bool while_running) noexcept override;

 private:
  // Each group below is defined in the file it names: one file per job.

  // --- The claim (etcd_register_claim.cc) ---
  // One Claim() call's attempts and the policy between them (how many, the pause, which
  // outcomes count): check the request, read the holders and marks, pick a number, lock
  // it on this host, commit, adopt.
  class ClaimAttempt;
  tl::expected<void, RegisterError> CheckClaimRequest(const ClaimRequest& request) const;
  // A lease for the next claim transaction: a new one if *lease_used (the previous one is
  // revoked first, so a late transaction that named it can never apply), else lease_ as is.
  tl::expected<void, RegisterError> FreshLease(bool* lease_used);
  // What a claim attempt read: the holders and marks it saw, and the numbers of the range
  // whose keys it read completely (`covered`); `whole`: every number of the prefix.
  struct ClaimWindow {
    EtcdSnapshot snap;
    std::vector<uint32_t> covered;
    bool whole = false;
  };
  // What a Claim() call's first read checks besides its keys: the fleet record the call
  // compares (created if absent: SettleFleet) and the store's age (CheckNotRolledBack).
  struct FirstLook {
    const etcd::FleetRecord* fleet = nullptr;
    const std::string* fleet_text = nullptr;
  };
  // One read of a claim: `ops` (ranges only) in one read-only transaction, which etcd
  // serves linearizably without a raft entry; with `first`, the fleet record and the
  // restore fence are read in the same transaction and checked. The answer holds the
  // results of `ops` only; the cluster's identity is noted.
  tl::expected<etcd::TxnResult, RegisterError> ClaimRead(std::vector<etcd::Op> ops,
                                                         const std::string& what,
                                                         const ClaimRequest& request,
                                                         const FirstLook* first,
                                                         std::vector<std::string>& notices);
  // The keys of machines/ and high-water/ from number `start` on, options_.claim_window of
  // each (wrapping at the end of the prefix when fewer than claim_window numbers of the
  // range lie at or above `start`), one ClaimRead per stretch; with `whole`, all
  // of them (paged). Numbers in `locked_here` are left out of `covered`.
  tl::expected<ClaimWindow, RegisterError> ReadWindow(uint32_t start, bool whole,
                                                      const std::set<uint32_t>& locked_here,
                                                      const ClaimRequest& request,
                                                      const FirstLook* first,
                                                      std::vector<std::string>& notices);
  // The two keys of `machine` (one ClaimRead).
  tl::expected<EtcdSnapshot, RegisterError> ReadNumber(uint32_t machine,
                                                       const ClaimRequest& request,
                                                       const FirstLook* first,
                                                       std::vector<std::string>& notices);
  // kNoFreeNumber, saying how many are held in range and under the prefix, and how many
  // more other daemons of this host hold.
  RegisterError NoFreeNumber(size_t holders_in_range, size_t held_under_prefix,
                             const std::set<uint32_t>& locked_here,
                             const std::filesystem::path& host_lock_dir,
                             const std::string& machines_prefix) const;
  // One claim transaction's outcome: claimed (with the number's mark), or a reason to try
  // again; `answered`: the transaction is decided and can never apply later.
  struct ClaimTxn {
    bool answered = false;
    bool claimed = false;
    std::string retry_reason;
    bool outage = false;  // the retry is for an unanswered transaction
    int64_t mark = 0;
    int64_t mark_writer = 0;
    int64_t mark_revision = 0;
  };
  // The transaction: the fleet record unchanged and the number as it was seen (absent, or
  // the holder's own record at `retake_revision`); then our record under lease_, and the
  // number's mark read. Errors: a refusal that retrying cannot mend, or a changed fleet.
  tl::expected<ClaimTxn, RegisterError> CommitClaim(uint32_t machine,
                                                    std::optional<int64_t> retake_revision,
                                                    const etcd::FleetRecord& fleet,
                                                    const std::string& fleet_text,
                                                    const std::string& record);
  // The claim won: the number, its host lock and the mark become this register's, and the
  // keepalive thread starts.
  MachineClaim Adopt(uint32_t machine, util::FileLock host_lock, const std::string& holder_id,
                     const ClaimTxn& txn, std::vector<std::string> notices);
  // The fleet record read anew, then SettleFleet.
  tl::expected<void, RegisterError> EnsureFleet(const etcd::FleetRecord& fleet,
                                                const std::string& fleet_text) noexcept;
  // The fleet record as read (`stored`; nullopt: absent): created if absent, else
  // kEpochMismatch unless it is `fleet_text` byte for byte.
  tl::expected<void, RegisterError> SettleFleet(const etcd::FleetRecord& fleet,
                                                const std::string& fleet_text,
                                                std::optional<std::string> stored);
  // Refuses a store older than what this host saw (request.last_seen), unless an operator
  // fenced its restore above request.local_high_water_ms (then a notice says so). `answer`
  // is the read's header, `fence` the restore fence read with it.
  tl::expected<void, RegisterError> CheckNotRolledBack(const ClaimRequest& request,
                                                       const etcd::RangeResult& answer,
                                                       const etcd::RangeResult& fence,
                                                       std::vector<std::string>& notices) noexcept;
  // A line for the log if the cluster runs an etcd with a bug that matters here; "" if not.
  // Asks etcd once per register (a member's status), then repeats the answer.
  std::string KnownBugNotice() noexcept;

  // --- The marks and fences (etcd_register_marks.cc) ---
  // What a write of the mark is for: a raise ahead of need, the clean stop, or the
  // acknowledgment of an operator's fence.
  enum class WriteKind { kRaise, kCleanStop, kAcknowledge };
  // Writes the mark for `kind` (a raise, the clean stop, an acknowledgment), over the steps
  // below: the first target, the transaction, and after a failed compare the mark read
  // anew and judged. Success only once committed, or when the mark already covers it.
  tl::expected<void, RegisterError> Raise(int64_t unix_ms, WriteKind kind) noexcept;
  // The first mark to write for `kind`, or none when a raise is committed already; an
  // acknowledgment also sets *acknowledged to the fence it obeys.
  std::optional<int64_t> FirstTarget(int64_t unix_ms, WriteKind kind,
                                     int64_t* acknowledged) noexcept;
  // The mark's write, comparing the lease and the mark's revision as last seen; its
  // failure branch reads the holder and the mark.
  etcd::TxnRequest MarkTxn(int64_t target, int64_t acknowledged) const;
  // What a failed compare found: the mark now, and the lease that wrote it.
  struct MovedMark {
    int64_t stored = 0;
    int64_t writer = 0;
  };
  // Reads a failed MarkTxn's answer: kClaimLost if the number is no longer ours, kCorrupt
  // for an unreadable answer, else the moved mark, taken in (revision, value, a fence).
  tl::expected<MovedMark, RegisterError> ReadMovedMark(const etcd::TxnResult& result);
  // Whether the moved mark settles the write (true: success without writing); else
  // *target is raised to what must be written next round.
  bool SettledByMovedMark(int64_t unix_ms, WriteKind kind, const MovedMark& moved,
                          int64_t* target) noexcept;
  // kFenced: a write for `what` found the operator's mark `moved` and wrote nothing.
  RegisterError FenceFound(const MovedMark& moved, const char* what) const;
  // Marks the claim lost for good and says why (the holder record names `now_held`).
  RegisterError ClaimLost(const std::string& now_held);
  // After an acknowledgment committed at `revision`: a restore the holder ran through
  // becomes the store this host has seen, and the restore fence it obeyed is recorded
  // (NoteRestoreFence), so it admits this host past no later restore.
  void AdoptFencedStore(int64_t revision) noexcept;
  // Records the restore fence's revision in identity_ if it is written and at or below the
  // fence acknowledged; else leaves restore_fence_looks_ for the next raise.
  void NoteRestoreFence() noexcept;

  // --- The operator's commands (etcd_register_commands.cc) ---
  // Raises the marks of `numbers` to at least `above_unix_ms`, each as List() read it
  // (`entries`, by number; absent: no mark), in transactions of kRaiseAllBatch numbers that
  // compare every mark's revision; a transaction that fails (a holder raised meanwhile) is
  // done again number by number (RaiseOne). A held number's mark is written even when it
  // is above already. With `holders_as_listed`, every write also compares the number's
  // holder record with the listing's, so a daemon that claimed a number after the listing
  // (and read its old mark) is never passed over in silence: kInUse names it.
  // Returns how many marks were below; sets *cluster_id.
  tl::expected<int, RegisterError> RaiseMarks(const std::vector<uint32_t>& numbers,
                                              const std::map<uint32_t, EtcdRegisterEntry>& entries,
                                              int64_t above_unix_ms, bool holders_as_listed,
                                              uint64_t* cluster_id) noexcept;
  // RaiseMarks for number `n` alone, reading its mark anew each round: whether the mark
  // was below `above_unix_ms`. Errors: kInUse (the holder changed since the listing, or
  // the mark kept changing), kCorrupt, kUnreachable, kUnreadable.
  tl::expected<bool, RegisterError> RaiseOne(uint32_t n,
                                             const std::map<uint32_t, EtcdRegisterEntry>& entries,
                                             int64_t above_unix_ms, bool holders_as_listed,
                                             uint64_t* cluster_id);
  // kInUse if n's holder record is no longer the one listed at `listed_revision` (0: none):
  // a daemon claimed it after the listing, reading its mark from before the fence.
  tl::expected<void, RegisterError> CheckHolderAsListed(uint32_t n, int64_t listed_revision);
  // Waits until every held entry of `holders` wrote a mark acknowledging a fence at or
  // above `fence` under its lease, or lost its number; returns the names of those that
  // lost it without acknowledging (NameHolder). Errors: kInUse naming the others.
  tl::expected<std::vector<std::string>, RegisterError> WaitForAcknowledgements(
      const std::map<uint32_t, EtcdRegisterEntry>& holders, int64_t fence) noexcept;

  // --- Shared by the files above (etcd_register.cc) ---
  // The holders and the marks under the prefix (linearizable ranges, paged: RangeAll), for
  // List() and raise-all; DecodeSnapshot (etcd_snapshot.h) decodes them.
  tl::expected<std::pair<etcd::RangeResult, etcd::RangeResult>, RegisterError>
  RangeHoldersAndMarks();
  // A linearizable range of [from, end) with `limit` (0: all in one answer).
  tl::expected<etcd::RangeResult, RegisterError> Ranged(const std::string& from,
                                                        const std::string& end, int64_t limit);
  // Every key of [from, end), in pages of kListPage; the header is the first page's.
  tl::expected<etcd::RangeResult, RegisterError> RangeAll(const std::string& from,
                                                          const std::string& end);
  void NoteIdentity(uint64_t cluster_id, int64_t revision) noexcept;
  // `what` failed because of `e`: kUnreachable for an outage (etcd::IsOutage: retry), else
  // kUnreadable with etcd's reason (a refusal, bad credentials, TLS: a config to fix).
  RegisterError Failure(const std::string& what, const etcd::Error& e) const;
  // "http://a:2379,http://b:2379".
  std::string endpoints() const;

  // Constant after construction.
  EtcdRegisterOptions options_;

  // Used by the caller's thread only.
  etcd::EtcdClient client_;
  std::optional<uint32_t> machine_;
  std::string holder_id_;
  int64_t lease_ = 0;
  Clock::SteadyTime lease_granted_{};  // when lease_ was asked for (clock().SteadyNow())
  int64_t claim_mark_ = 0;     // the mark read when claiming: never write below it
  int64_t committed_ = 0;      // the highest mark a committed raise wrote
  int64_t attempted_max_ = 0;  // the highest mark any raise tried (may have committed)
  // The mark as this holder last saw it: every write compares mark_revision_, so a request
  // applied late changes nothing (docs/etcd-fencing.md).
  int64_t mark_revision_ = 0;  // 0: the key is absent
  int64_t mark_value_ = 0;
  // The highest mark another writer (an operator) put on our number since the claim, and
  // the highest such fence this holder has acknowledged (written into its marks).
  int64_t fence_ms_ = 0;
  int64_t fence_acknowledged_ = 0;
  // Raises after an acknowledgment that still look for the restore fence it obeyed (raise-
  // all writes it after the marks); 0: found, or never looked for.
  static constexpr int kRestoreFenceLooks = 64;
  int restore_fence_looks_ = 0;
  RegisterIdentity identity_;
  std::optional<std::string> known_bug_notice_;  // KnownBugNotice's, once etcd answered
  std::optional<util::FileLock> machine_lock_;   // the host-wide lock of the claimed number

  // Shared with the keepalive thread: the lease's renewal and the claim's lost flag
  // (etcd_keepalive.h; its own connection, its own lock).
  EtcdKeepAlive keepalive_;
};

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_ETCD_REGISTER_H_
