// The etcd register's marks and fences (etcd_register.h: UpdateHighWater, RecordCleanStop,
// AcknowledgeFence): every write of high-water/N compares this holder's lease and the
// mark's revision as last seen, and a mark another writer put there is an operator's fence
// (docs/etcd-fencing.md, "The protocol" from step 3, "Why a late, repeated or reordered
// request cannot lower the mark" and "An operator's fence under a running holder").

#include <algorithm>

#include "register/etcd_register.h"
#include "register/etcd_snapshot.h"
#include "snowflake/time_text.h"

namespace snowflake::reg {
namespace {

using etcd::Compare;
using etcd::Op;

RegisterError Err(RegisterErrorCode code, std::string message) {
  return RegisterError{code, std::move(message)};
}

}  // namespace

tl::expected<void, RegisterError> EtcdRegister::UpdateHighWater(int64_t unix_ms) noexcept {
  return Raise(unix_ms, WriteKind::kRaise);
}

tl::expected<void, RegisterError> EtcdRegister::RecordCleanStop(
    int64_t last_issued_unix_ms) noexcept {
  return Raise(last_issued_unix_ms, WriteKind::kCleanStop);
}

tl::expected<void, RegisterError> EtcdRegister::AcknowledgeFence(int64_t fence_unix_ms) noexcept {
  if (fence_unix_ms <= fence_acknowledged_) return {};
  return Raise(fence_unix_ms, WriteKind::kAcknowledge);
}

tl::expected<void, RegisterError> EtcdRegister::Raise(int64_t unix_ms, WriteKind kind) noexcept {
  try {
    if (!machine_) return tl::unexpected(Err(RegisterErrorCode::kNotClaimed, "not claimed"));
    if (claim_lost()) {
      return tl::unexpected(Err(RegisterErrorCode::kClaimLost, keepalive_.lost_reason()));
    }
    int64_t acknowledged = fence_acknowledged_;
    const std::optional<int64_t> first = FirstTarget(unix_ms, kind, &acknowledged);
    if (!first) return {};
    int64_t target = *first;
    const char* what = kind == WriteKind::kCleanStop     ? "record the clean stop"
                       : kind == WriteKind::kAcknowledge ? "acknowledge the fence"
                                                         : "raise the high-water mark";
    // A failed compare with the lease still ours means the mark moved under us (our own
    // late request, or an operator's raise-all): read it and try again.
    for (int round = 0; round < kRaiseRounds; ++round) {
      auto result = client_.Txn(MarkTxn(target, acknowledged));
      if (!result) {
        return tl::unexpected(Failure(std::string("not committed: cannot ") + what +
                                          " of machine " + std::to_string(*machine_) + " at " +
                                          FormatTimeText(target),
                                      result.error()));
      }
      NoteIdentity(result->cluster_id, result->revision);
      if (result->succeeded) {
        // The put is the transaction's only write: the new revision is the mark's.
        mark_revision_ = result->revision;
        mark_value_ = target;
        committed_ = kind == WriteKind::kCleanStop ? target : std::max(committed_, target);
        attempted_max_ = std::max(attempted_max_, target);
        fence_acknowledged_ = acknowledged;
        if (kind == WriteKind::kAcknowledge) {
          AdoptFencedStore(result->revision);
        } else if (restore_fence_looks_ > 0) {
          NoteRestoreFence();
        }
        return {};
      }
      auto moved = ReadMovedMark(*result);
      if (!moved) return tl::unexpected(moved.error());
      if (SettledByMovedMark(unix_ms, kind, *moved, &target)) return {};
      // An operator's mark: a write under our lease would cover it, and with it the only
      // record of the fence. A crash right after such a write would restart on the
      // surviving segment, trusting our own mark, below the fence. So the call ends here;
      // the caller records fence_unix_ms() on this host first and calls again (the
      // revision just read then lets the write through).
      if (moved->writer != lease_) return tl::unexpected(FenceFound(*moved, what));
    }
    return tl::unexpected(
        Err(RegisterErrorCode::kUnreachable,
            "not committed: the high-water mark of machine " + std::to_string(*machine_) +
                " changed under this holder " + std::to_string(kRaiseRounds) + " times in a row (" +
                etcd::HighWaterKey(options_.prefix, *machine_) + "); retrying later"));
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

std::optional<int64_t> EtcdRegister::FirstTarget(int64_t unix_ms, WriteKind kind,
                                                 int64_t* acknowledged) noexcept {
  // A raise writes at least every earlier attempt (one that timed out may still commit),
  // so what this holder relies on only grows. A clean stop writes what was issued, never
  // below the mark this claim started above nor below an operator's fence found since.
  // An acknowledgment writes the mark again, never lower, with the fence it obeys.
  switch (kind) {
    case WriteKind::kRaise: {
      const int64_t target = std::max(unix_ms, attempted_max_);
      if (target <= committed_) return std::nullopt;
      attempted_max_ = target;
      return target;
    }
    case WriteKind::kCleanStop:
      return std::max({unix_ms, claim_mark_, fence_ms_});
    case WriteKind::kAcknowledge:
      *acknowledged = unix_ms;
      return std::max({unix_ms, attempted_max_, mark_value_});
  }
  return std::nullopt;
}

etcd::TxnRequest EtcdRegister::MarkTxn(int64_t target, int64_t acknowledged) const {
  // Each write compares the mark's mod_revision with the one this holder last saw, as
  // well as the lease. A request that etcd applies late (after a timeout, after later
  // requests, or twice: a stalled member replays what it buffered) compares a revision
  // that is no longer current and changes nothing, so the stored mark never goes down.
  const std::string machine_key = etcd::MachineKey(options_.prefix, *machine_);
  const std::string mark_key = etcd::HighWaterKey(options_.prefix, *machine_);
  etcd::TxnRequest txn;
  txn.compare = {Compare::Lease(machine_key, lease_),
                 Compare::ModRevision(mark_key, Compare::Result::kEqual, mark_revision_)};
  txn.success = {Op::Put(mark_key, etcd::EncodeHighWater(etcd::HighWaterRecord{
                                       target, holder_id_, lease_, acknowledged}))};
  txn.failure = {Op::Get(machine_key), Op::Get(mark_key)};
  return txn;
}

tl::expected<EtcdRegister::MovedMark, RegisterError> EtcdRegister::ReadMovedMark(
    const etcd::TxnResult& result) {
  if (result.responses.size() != 2) {
    return tl::unexpected(Err(RegisterErrorCode::kCorrupt,
                              "a raise transaction's failure branch answered with " +
                                  std::to_string(result.responses.size()) + " results, not 2"));
  }
  const auto& holder_kvs = result.responses[0].range.kvs;
  if (holder_kvs.empty() || holder_kvs[0].lease != lease_) {
    std::string now_held = "nobody holds it now";
    if (!holder_kvs.empty()) {
      auto rec = DecodeHolderAt(etcd::MachineKey(options_.prefix, *machine_), holder_kvs[0].value);
      now_held =
          rec ? "it is held by " + HolderText(*rec) + " now" : "it holds an unreadable record now";
    }
    return tl::unexpected(ClaimLost(now_held));
  }
  // Still ours: the mark moved. Continue from what it holds now.
  const auto& mark_kvs = result.responses[1].range.kvs;
  MovedMark moved;
  if (mark_kvs.empty()) {
    mark_revision_ = 0;
  } else {
    auto rec = DecodeMarkAt(etcd::HighWaterKey(options_.prefix, *machine_), mark_kvs[0].value);
    if (!rec) return tl::unexpected(rec.error());
    mark_revision_ = mark_kvs[0].mod_revision;
    moved.stored = rec->unix_ms;
    moved.writer = rec->lease;
  }
  mark_value_ = moved.stored;
  // Never write below what the mark holds now (an operator's raise-all, or our own late
  // raise): later raises start from it.
  attempted_max_ = std::max(attempted_max_, moved.stored);
  // Written by someone else while the number is ours: only an operator does that
  // (`register raise-all`, lease 0; any other holder's write fails its lease compare). It
  // is a fence: the IDs this holder issues from now on must lie above it, whatever its
  // clock says (fence_unix_ms(); the daemon pauses until its clock passes it).
  if (moved.writer != lease_ && moved.stored > fence_ms_) fence_ms_ = moved.stored;
  return moved;
}

bool EtcdRegister::SettledByMovedMark(int64_t unix_ms, WriteKind kind, const MovedMark& moved,
                                      int64_t* target) noexcept {
  switch (kind) {
    case WriteKind::kRaise:
      // A stored mark at or above the target already covers it: marks only rise (but for
      // a live holder's own clean stop), so every later holder starts above it.
      if (moved.stored >= *target) {
        committed_ = std::max(committed_, *target);
        return true;
      }
      return false;
    case WriteKind::kCleanStop:
      // A clean stop lowers only what this holder itself wrote.
      if (moved.writer != lease_) *target = std::max(*target, moved.stored);
      return false;
    case WriteKind::kAcknowledge:
      // A newer fence than the one obeyed: the daemon must apply it first.
      if (fence_ms_ > unix_ms) return true;
      *target = std::max(*target, moved.stored);
      return false;
  }
  return false;
}

RegisterError EtcdRegister::FenceFound(const MovedMark& moved, const char* what) const {
  return Err(RegisterErrorCode::kFenced,
             std::string("not written: an operator fenced machine ") + std::to_string(*machine_) +
                 " at " + FormatTimeText(moved.stored) + " (" +
                 etcd::HighWaterKey(options_.prefix, *machine_) +
                 " written without this holder's lease) while this holder went to " + what +
                 "; record the fence on this host, then write again");
}

RegisterError EtcdRegister::ClaimLost(const std::string& now_held) {
  const std::string reason =
      "machine " + std::to_string(*machine_) + " is no longer ours in the etcd register (" +
      etcd::MachineKey(options_.prefix, *machine_) + " is not bound to our lease " +
      std::to_string(lease_) + "; " + now_held + "): stop serving and claim anew";
  keepalive_.MarkLost(reason);
  return Err(RegisterErrorCode::kClaimLost, reason);
}

void EtcdRegister::AdoptFencedStore(int64_t revision) noexcept {
  // This holder has just obeyed an operator's fence written into the store as it is now.
  // If it ran through a restore, the acknowledgment's revision is below the highest this
  // holder saw (NoteIdentity keeps the highest, and has taken a new cluster id already):
  // that restore is fenced, so the store as it is becomes the one this host has seen.
  // Otherwise every later start would find the store older than its state file and be
  // refused (exit 78, not restarted), although the operator did what it asks.
  if (revision < identity_.revision) identity_.revision = revision;
  restore_fence_looks_ = kRestoreFenceLooks;
  NoteRestoreFence();
}

void EtcdRegister::NoteRestoreFence() noexcept {
  // The restore fence `raise-all` records after raising the marks (it may not be written
  // yet when the holder acknowledges): once this host has obeyed it, it answers no later
  // restore, since a backup taken after it carries it along (CheckNotRolledBack).
  --restore_fence_looks_;
  const std::string restore_key = etcd::RestoreKey(options_.prefix);
  auto fence = client_.Range(restore_key);
  if (!fence || fence->kvs.empty()) return;  // looked for again after the next raise
  auto record = DecodeRestoreAt(restore_key, fence->kvs[0].value);
  if (!record || record->above_unix_ms > fence_acknowledged_) return;  // not the one obeyed
  identity_.fence_revision = std::max(identity_.fence_revision, fence->kvs[0].mod_revision);
  restore_fence_looks_ = 0;
}

}  // namespace snowflake::reg
