// The etcd register's operator commands (etcd_register.h: List, ListNumbers, Release,
// RaiseAll), which `snowflakectl register list|show|release|raise-all` runs without a
// daemon (docs/etcd-fencing.md, "A restored etcd" and "An operator's fence under a running
// holder").

#include <algorithm>
#include <chrono>

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

// "machine 3 (\"host-a\" on a.example, pid 812)": a held entry of List().
std::string NameHolder(const EtcdRegisterEntry& e) {
  return "machine " + std::to_string(e.machine) + " (" + HolderText(*e.holder) + ")";
}

std::string Names(const std::map<uint32_t, EtcdRegisterEntry>& holders) {
  std::string names;
  for (const auto& [n, e] : holders) names += (names.empty() ? "" : ", ") + NameHolder(e);
  return names;
}

// The holder record's revision of number n as listed (0: none), which a write may compare.
int64_t ListedHolder(const std::map<uint32_t, EtcdRegisterEntry>& entries, uint32_t n) {
  const auto e = entries.find(n);
  return e == entries.end() ? 0 : e->second.holder_revision;
}

// The comparison that n's holder record is still the one listed.
etcd::Compare HolderAsListed(const std::string& prefix,
                             const std::map<uint32_t, EtcdRegisterEntry>& entries, uint32_t n) {
  return Compare::ModRevision(etcd::MachineKey(prefix, n), Compare::Result::kEqual,
                              ListedHolder(entries, n));
}

// The mark raise-all writes over `stored` (absent: no mark): at least the fence, never
// lower, its last holder kept.
etcd::HighWaterRecord RaisedMark(const std::optional<etcd::HighWaterRecord>& stored,
                                 int64_t above_unix_ms) {
  etcd::HighWaterRecord record{above_unix_ms, "", 0};
  if (stored) {
    record.unix_ms = std::max(stored->unix_ms, above_unix_ms);
    record.holder = stored->holder;
  }
  return record;
}

}  // namespace

tl::expected<std::vector<RegisterListEntry>, RegisterError> EtcdRegister::ListNumbers() noexcept {
  try {
    auto entries = List();
    if (!entries) return tl::unexpected(entries.error());
    std::vector<RegisterListEntry> out;
    for (const EtcdRegisterEntry& e : *entries) {
      RegisterListEntry row;
      row.machine = e.machine;
      if (e.holder) {
        row.holder = e.holder->holder;
        row.host = e.holder->host;
        row.pid = e.holder->pid;
        row.since_unix_ms = e.holder->since_unix_ms;
        row.live = e.live();  // a TTL of 0: alive, in its last second
        row.lease_left_s = e.lease_ttl_left_s;
      }  // else free: the mark remembers the last holder
      if (e.high_water) row.high_water_unix_ms = e.high_water->unix_ms;
      out.push_back(std::move(row));
    }
    return out;
  } catch (const std::exception& e) {
    return tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, e.what()});
  }
}

tl::expected<std::vector<EtcdRegisterEntry>, RegisterError> EtcdRegister::List() noexcept {
  try {
    auto read = RangeHoldersAndMarks();
    if (!read) return tl::unexpected(read.error());
    auto snap = DecodeSnapshot(options_.prefix, read->first, read->second);
    if (!snap) return tl::unexpected(snap.error());
    std::map<uint32_t, EtcdRegisterEntry> entries;
    for (auto& [n, held] : snap->held) {
      EtcdRegisterEntry& e = entries[n];
      e.machine = n;
      e.holder = std::move(held.record);
      e.lease = held.lease;
      e.holder_revision = held.mod_revision;
      if (held.lease != 0) {
        auto ttl = client_.TimeToLive(held.lease);
        if (!ttl) return tl::unexpected(Failure("cannot read a lease", ttl.error()));
        e.lease_ttl_left_s = ttl->ttl_s;
      }
    }
    for (auto& [n, mark] : snap->marks) {
      EtcdRegisterEntry& e = entries[n];
      e.machine = n;
      e.high_water = std::move(mark.record);
      e.high_water_revision = mark.mod_revision;
    }
    std::vector<EtcdRegisterEntry> out;
    for (auto& [n, e] : entries) out.push_back(std::move(e));
    return out;
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

tl::expected<void, RegisterError> EtcdRegister::Release(uint32_t machine) noexcept {
  try {
    if (machine > options_.id_bits.max_machine()) {
      return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest,
                                "machine " + std::to_string(machine) + " is out of range 0-" +
                                    std::to_string(options_.id_bits.max_machine()) +
                                    " of id.layout " + FormatIdBits(options_.id_bits)));
    }
    const std::string machine_key = etcd::MachineKey(options_.prefix, machine);
    const std::string mark_key = etcd::HighWaterKey(options_.prefix, machine);
    auto held = client_.Range(machine_key);
    if (!held) return tl::unexpected(Failure("cannot read " + machine_key, held.error()));
    auto mark = client_.Range(mark_key);
    if (!mark) return tl::unexpected(Failure("cannot read " + mark_key, mark.error()));
    if (held->kvs.empty() && mark->kvs.empty()) {
      return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest,
                                "machine " + std::to_string(machine) +
                                    " has no holder and no mark in the etcd register (" +
                                    location() + "): nothing to release"));
    }
    etcd::TxnRequest txn;
    if (!held->kvs.empty()) {
      const auto& kv = held->kvs[0];
      if (kv.lease != 0) {
        auto ttl = client_.TimeToLive(kv.lease);
        if (!ttl) return tl::unexpected(Failure("cannot read a lease", ttl.error()));
        if (ttl->alive()) {
          auto rec = DecodeHolderAt(machine_key, kv.value);
          return tl::unexpected(
              Err(RegisterErrorCode::kInUse,
                  "machine " + std::to_string(machine) + " is held by a live daemon" +
                      (rec ? " (" + HolderText(*rec) + ")" : std::string()) + " whose lease has " +
                      (ttl->ttl_s > 0 ? std::to_string(ttl->ttl_s) + " s"
                                      : std::string("under a second")) +
                      " left: stop that daemon first"));
        }
      }
      // Only if nobody re-claimed it meanwhile.
      txn.compare.push_back(
          Compare::ModRevision(machine_key, Compare::Result::kEqual, kv.mod_revision));
      txn.success.push_back(Op::Delete(machine_key));
    }
    if (!mark->kvs.empty()) {
      const auto& kv = mark->kvs[0];
      auto rec = DecodeMarkAt(mark_key, kv.value);
      if (!rec) return tl::unexpected(rec.error());
      if (!rec->holder.empty()) {
        // Keep the mark exactly; forget who set it. The comparison makes sure a raise that
        // lands meanwhile is not undone.
        txn.compare.push_back(
            Compare::ModRevision(mark_key, Compare::Result::kEqual, kv.mod_revision));
        txn.success.push_back(Op::Put(mark_key, etcd::EncodeHighWater({rec->unix_ms, ""})));
      }
    }
    if (txn.success.empty()) return {};
    auto result = client_.Txn(txn);
    if (!result)
      return tl::unexpected(
          Failure("cannot release machine " + std::to_string(machine), result.error()));
    if (!result->succeeded) {
      return tl::unexpected(Err(RegisterErrorCode::kInUse,
                                "machine " + std::to_string(machine) +
                                    " changed while releasing it (a daemon claimed it): not "
                                    "released"));
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

tl::expected<RaiseAllResult, RegisterError> EtcdRegister::RaiseAll(int64_t above_unix_ms,
                                                                   bool while_running) noexcept {
  try {
    auto listed = List();
    if (!listed) return tl::unexpected(listed.error());
    std::map<uint32_t, EtcdRegisterEntry> entries;
    for (EtcdRegisterEntry& e : *listed) entries.emplace(e.machine, std::move(e));
    // A running holder issues from its own clock until it learns of the fence: refused
    // unless the operator asks for the fence to be put under running holders.
    std::map<uint32_t, EtcdRegisterEntry> live;
    for (const auto& [n, e] : entries) {
      if (e.live()) live.emplace(n, e);
    }
    if (!live.empty() && !while_running) {
      return tl::unexpected(Err(
          RegisterErrorCode::kInUse,
          std::to_string(live.size()) + " number(s) are held by running daemons: " + Names(live) +
              ". A running daemon keeps issuing from its own clock, below the fence, until it "
              "learns of it. Stop every daemon of the fleet and run this again, or pass "
              "--while-running: each running daemon then pauses until its clock passes the "
              "fence, and raise-all returns once every one has acknowledged it"));
    }
    // Every number below the fence, also one the restored store has no mark for (it may
    // have been used after the backup was taken), and every held one even when its mark is
    // above: its holder learns of the fence only from a write of its mark that is not its
    // own, and a mark above the fence says nothing of the IDs the holder issued below it.
    std::vector<uint32_t> numbers;
    for (uint32_t n = 0; n <= options_.id_bits.max_machine(); ++n) {
      const auto e = entries.find(n);
      const bool below = e == entries.end() || !e->second.high_water ||
                         e->second.high_water->unix_ms < above_unix_ms;
      if (below || live.contains(n)) numbers.push_back(n);
    }
    if (options_.after_raise_all_listing) options_.after_raise_all_listing();
    uint64_t cluster_id = 0;
    // Without --while-running nobody may hold a number: every write compares the holder
    // records as listed, so a claim between the listing and the raise is refused, named.
    auto raised = RaiseMarks(numbers, entries, above_unix_ms, !while_running, &cluster_id);
    if (!raised) return tl::unexpected(raised.error());
    if (while_running) {
      // A daemon that claimed a number after the listing, before its mark was raised, read
      // the old mark: its mark is written again, and it is waited for too. One that claims
      // from now on reads a mark at or above the fence.
      auto again = List();
      if (!again) return tl::unexpected(again.error());
      std::vector<uint32_t> newcomers;
      std::map<uint32_t, EtcdRegisterEntry> now_entries;
      for (EtcdRegisterEntry& e : *again) {
        const auto known = live.find(e.machine);
        if (e.live() && (known == live.end() || known->second.lease != e.lease)) {
          newcomers.push_back(e.machine);
          live.insert_or_assign(e.machine, e);
        }
        now_entries.emplace(e.machine, std::move(e));
      }
      if (auto more = RaiseMarks(newcomers, now_entries, above_unix_ms,
                                 /*holders_as_listed=*/false, &cluster_id);
          !more) {
        return tl::unexpected(more.error());
      }
    }
    if (cluster_id == 0) {
      auto status = client_.Status();
      if (!status) return tl::unexpected(Failure("cannot read the cluster id", status.error()));
      cluster_id = status->cluster_id;
    }
    // The fence's own mod_revision, the revision it is written at, is what ties it to this
    // restore: a host that already saw a fence of this revision saw the store after it was
    // written, so a rollback it finds later is not the one this fence answers.
    const etcd::RestoreRecord fence{above_unix_ms, cluster_id, clock().NowUnixMs()};
    if (auto put = client_.Put(etcd::RestoreKey(options_.prefix), etcd::EncodeRestore(fence));
        !put) {
      return tl::unexpected(Failure("cannot record the restore fence", put.error()));
    }
    RaiseAllResult result{.raised = *raised, .ended_unacknowledged = {}};
    if (while_running && !live.empty()) {
      auto acknowledged = WaitForAcknowledgements(live, above_unix_ms);
      if (!acknowledged) return tl::unexpected(acknowledged.error());
      result.ended_unacknowledged = std::move(*acknowledged);
    }
    return result;
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

tl::expected<int, RegisterError> EtcdRegister::RaiseMarks(
    const std::vector<uint32_t>& numbers, const std::map<uint32_t, EtcdRegisterEntry>& entries,
    int64_t above_unix_ms, bool holders_as_listed, uint64_t* cluster_id) noexcept {
  try {
    int raised = 0;
    for (size_t from = 0; from < numbers.size(); from += kRaiseAllBatch) {
      const size_t to = std::min(numbers.size(), from + kRaiseAllBatch);
      etcd::TxnRequest txn;
      int below = 0;
      for (size_t i = from; i < to; ++i) {
        const auto entry = entries.find(numbers[i]);
        const bool has_mark = entry != entries.end() && entry->second.high_water.has_value();
        const std::string key = etcd::HighWaterKey(options_.prefix, numbers[i]);
        txn.compare.push_back(Compare::ModRevision(
            key, Compare::Result::kEqual, has_mark ? entry->second.high_water_revision : 0));
        // Within etcd's --max-txn-ops (128): a batch compares 2 x kRaiseAllBatch keys.
        if (holders_as_listed) {
          txn.compare.push_back(HolderAsListed(options_.prefix, entries, numbers[i]));
        }
        txn.success.push_back(
            Op::Put(key, etcd::EncodeHighWater(RaisedMark(
                             has_mark ? entry->second.high_water : std::nullopt, above_unix_ms))));
        if (!has_mark || entry->second.high_water->unix_ms < above_unix_ms) ++below;
      }
      auto result = client_.Txn(txn);
      if (!result) return tl::unexpected(Failure("cannot raise the marks", result.error()));
      *cluster_id = result->cluster_id;
      if (result->succeeded) {
        raised += below;
        continue;
      }
      for (size_t i = from; i < to; ++i) {
        auto one = RaiseOne(numbers[i], entries, above_unix_ms, holders_as_listed, cluster_id);
        if (!one) return tl::unexpected(one.error());
        raised += *one ? 1 : 0;
      }
    }
    return raised;
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

tl::expected<bool, RegisterError> EtcdRegister::RaiseOne(
    uint32_t n, const std::map<uint32_t, EtcdRegisterEntry>& entries, int64_t above_unix_ms,
    bool holders_as_listed, uint64_t* cluster_id) {
  const std::string key = etcd::HighWaterKey(options_.prefix, n);
  for (int round = 0;; ++round) {
    auto current = client_.Range(key);
    if (!current) return tl::unexpected(Failure("cannot read " + key, current.error()));
    std::optional<etcd::HighWaterRecord> stored;
    int64_t revision = 0;
    if (!current->kvs.empty()) {
      auto decoded = DecodeMarkAt(key, current->kvs[0].value);
      if (!decoded) return tl::unexpected(decoded.error());
      stored = std::move(*decoded);
      revision = current->kvs[0].mod_revision;
    }
    etcd::TxnRequest txn;
    txn.compare = {Compare::ModRevision(key, Compare::Result::kEqual, revision)};
    if (holders_as_listed) txn.compare.push_back(HolderAsListed(options_.prefix, entries, n));
    txn.success = {Op::Put(key, etcd::EncodeHighWater(RaisedMark(stored, above_unix_ms)))};
    auto result = client_.Txn(txn);
    if (!result) return tl::unexpected(Failure("cannot raise " + key, result.error()));
    *cluster_id = result->cluster_id;
    if (result->succeeded) return !stored || stored->unix_ms < above_unix_ms;
    if (holders_as_listed) {
      if (auto same = CheckHolderAsListed(n, ListedHolder(entries, n)); !same) {
        return tl::unexpected(same.error());
      }
    }
    if (round >= kRaiseRounds) {
      return tl::unexpected(
          Err(RegisterErrorCode::kInUse, key + " keeps changing (a live holder raises it): stop "
                                               "every daemon of the fleet and run this again"));
    }
  }
}

tl::expected<void, RegisterError> EtcdRegister::CheckHolderAsListed(uint32_t n,
                                                                    int64_t listed_revision) {
  // A daemon that claimed n after the listing read its mark from before the fence, and
  // issues from its own clock.
  const std::string key = etcd::MachineKey(options_.prefix, n);
  auto now = client_.Range(key);
  if (!now) return tl::unexpected(Failure("cannot read " + key, now.error()));
  const int64_t revision = now->kvs.empty() ? 0 : now->kvs[0].mod_revision;
  if (revision == listed_revision) return {};
  std::string who = "its record was removed";
  if (!now->kvs.empty()) {
    auto rec = DecodeHolderAt(key, now->kvs[0].value);
    who = rec ? HolderText(*rec) + " claimed it" : "an unreadable record was put there";
  }
  return tl::unexpected(
      Err(RegisterErrorCode::kInUse,
          "machine " + std::to_string(n) + " changed hands while raise-all ran: " + who +
              " after the listing, so a running daemon may issue below the fence. Nothing "
              "past the marks raised so far was written and the restore fence is not recorded. "
              "Stop every daemon of the fleet and run this again, or pass --while-running"));
}

tl::expected<std::vector<std::string>, RegisterError> EtcdRegister::WaitForAcknowledgements(
    const std::map<uint32_t, EtcdRegisterEntry>& holders, int64_t fence) noexcept {
  try {
    std::map<uint32_t, EtcdRegisterEntry> waiting = holders;
    std::vector<std::string> ended_unacknowledged;
    const auto deadline = clock().SteadyNow() + options_.fence_ack_timeout;
    for (;;) {
      for (auto it = waiting.begin(); it != waiting.end();) {
        const auto& [n, holder] = *it;
        // One transaction: the number's record and its mark, as of one revision.
        etcd::TxnRequest txn;
        txn.success = {Op::Get(etcd::MachineKey(options_.prefix, n)),
                       Op::Get(etcd::HighWaterKey(options_.prefix, n))};
        auto read = client_.Txn(txn);
        if (!read)
          return tl::unexpected(Failure("cannot read machine " + std::to_string(n), read.error()));
        if (read->responses.size() != 2) {
          return tl::unexpected(Err(RegisterErrorCode::kCorrupt,
                                    "a read of machine " + std::to_string(n) + " answered with " +
                                        std::to_string(read->responses.size()) +
                                        " results, not 2"));
        }
        const auto& record_kvs = read->responses[0].range.kvs;
        const auto& mark_kvs = read->responses[1].range.kvs;
        bool acknowledged = false;
        if (!mark_kvs.empty()) {
          auto mark = DecodeMarkAt(etcd::HighWaterKey(options_.prefix, n), mark_kvs[0].value);
          if (!mark) return tl::unexpected(mark.error());
          acknowledged = mark->lease == holder.lease && mark->fence >= fence;
        }
        // The holder's claim ended before it acknowledged (a stop, or its lease expired):
        // whoever claims the number next starts above the fence, but the holder itself, if
        // it is cut off and still running, serves what it holds until it notices. Said.
        const bool ended = record_kvs.empty() || record_kvs[0].lease != holder.lease;
        if (ended && !acknowledged) ended_unacknowledged.push_back(NameHolder(holder));
        it = acknowledged || ended ? waiting.erase(it) : std::next(it);
      }
      if (waiting.empty()) return ended_unacknowledged;
      if (clock().SteadyNow() >= deadline) break;
      clock().SleepFor(std::chrono::milliseconds(100));
    }
    return tl::unexpected(Err(
        RegisterErrorCode::kInUse,
        "every mark is raised and the fence is recorded, but " + std::to_string(waiting.size()) +
            " running holder(s) did not acknowledge it within " +
            std::to_string(options_.fence_ack_timeout.count() / 1000) + " s: " + Names(waiting) +
            ". Until one does, it may still hand out IDs at or below " + FormatTimeText(fence) +
            ". Check its status (`snowflakectl status` on that host: is it paused, or cut off "
            "from etcd?), or stop it"));
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

}  // namespace snowflake::reg
