#include "register/etcd_register.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "register/etcd_json.h"
#include "register/etcd_snapshot.h"
#include "register/machine_lock.h"
#include "snowflake/time_text.h"

namespace snowflake::daemon {
namespace {

using etcd::Compare;
using etcd::ErrorKind;
using etcd::Op;

RegisterError Err(RegisterErrorCode code, std::string message) {
  return RegisterError{code, std::move(message)};
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
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

// The pick policy: the number this host's state file names, if it is ours or free and no
// other holder remembers it; else our own held record; else a free number whose last
// holder was us; else the lowest free number no other holder remembers (so a holder that
// is restarting elsewhere finds its own number still free); else the lowest free number.
// Only numbers in [first, last] that no other daemon of this host holds (`locked_here`).
Pick PickNumber(const EtcdSnapshot& snap, const ClaimRequest& request, uint32_t first,
                uint32_t last, const std::set<uint32_t>& locked_here) {
  const auto in_range = [&](uint32_t n) {
    return n >= first && n <= last && !locked_here.contains(n);
  };
  if (const auto preferred = request.preferred_machine; preferred && in_range(*preferred)) {
    const auto held = snap.held.find(*preferred);
    const auto mark = snap.marks.find(*preferred);
    if (held != snap.held.end()) {
      if (held->second.record.holder == request.holder_id) {
        return Pick{*preferred, held->second.mod_revision};
      }
    } else if (mark == snap.marks.end() || mark->second.record.holder.empty() ||
               mark->second.record.holder == request.holder_id) {
      return Pick{*preferred, std::nullopt};
    }
  }
  for (const auto& [n, h] : snap.held) {
    if (in_range(n) && h.record.holder == request.holder_id) return Pick{n, h.mod_revision};
  }
  for (const auto& [n, m] : snap.marks) {
    if (in_range(n) && !snap.held.contains(n) && m.record.holder == request.holder_id) {
      return Pick{n, std::nullopt};
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t n = first; n <= last; ++n) {
      if (snap.held.contains(n) || locked_here.contains(n)) continue;
      const auto mark = snap.marks.find(n);
      const bool remembered = mark != snap.marks.end() && !mark->second.record.holder.empty();
      if (pass == 1 || !remembered) return Pick{n, std::nullopt};
    }
  }
  return Pick{};
}

}  // namespace

EtcdRegisterOptions EtcdRegisterOptionsFrom(const EtcdRegisterConfig& own,
                                            const RegisterCommon& common) {
  EtcdRegisterOptions options;
  options.client.endpoints = own.endpoints;
  options.client.connect_timeout_ms = own.connect_timeout_ms;
  options.client.request_timeout_ms = own.request_timeout_ms;
  options.client.ca_file = own.ca_file.string();
  options.client.cert_file = own.cert_file.string();
  options.client.key_file = own.key_file.string();
  options.client.user = own.user;
  options.client.password = own.password;
  options.prefix = own.prefix;
  options.lease_ttl_s = own.lease_ttl_s;
  options.first_machine = common.first_machine;
  options.last_machine = common.last_machine;
  if (!own.password_file.empty()) {
    std::ifstream in(own.password_file);
    std::string password;
    if (!in || !std::getline(in, password)) {
      options.setup_error = "cannot read register.etcd.password_file " +
                            own.password_file.string() + ": " +
                            (in ? std::string("it is empty") : std::strerror(errno));
    }
    if (!password.empty() && password.back() == '\r') password.pop_back();
    options.client.password = password;
  }
  return options;
}

std::unique_ptr<MachineRegister> MakeEtcdRegister(const EtcdRegisterConfig& own,
                                                  const RegisterCommon& common) {
  return std::make_unique<EtcdRegister>(EtcdRegisterOptionsFrom(own, common));
}

EtcdRegister::EtcdRegister(EtcdRegisterOptions options)
    : options_(std::move(options)),
      client_(options_.client),
      keepalive_(options_.client, options_.lease_ttl_s) {
  if (options_.host.empty()) options_.host = HostName();
}

EtcdRegister::~EtcdRegister() {
  keepalive_.Stop();
  if (lease_ != 0) (void)client_.Revoke(lease_);
}

std::string EtcdRegister::endpoints() const {
  std::string out;
  for (size_t i = 0; i < options_.client.endpoints.size(); ++i) {
    if (i > 0) out += ",";
    out += options_.client.endpoints[i];
  }
  return out;
}

std::string EtcdRegister::location() const { return "etcd " + endpoints() + " " + options_.prefix; }

RegisterError EtcdRegister::Failure(const std::string& what, const etcd::Error& e) const {
  if (etcd::IsOutage(e)) {
    return Err(RegisterErrorCode::kUnreachable,
               "etcd unreachable at " + endpoints() + ": " + what + ": " + e.message);
  }
  return Err(RegisterErrorCode::kUnreadable,
             what + " in the etcd register (" + location() + "): " + e.message);
}

tl::expected<void, RegisterError> EtcdRegister::EnsureFleet(
    const etcd::FleetRecord& fleet, const std::string& fleet_text) noexcept {
  const std::string key = etcd::ConfigKey(options_.prefix);
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
  const std::string& stored = result->responses[0].range.kvs[0].value;
  if (stored == fleet_text) return {};
  auto decoded = DecodeFleetAt(key, stored);
  if (!decoded) return tl::unexpected(decoded.error());
  return tl::unexpected(Err(
      RegisterErrorCode::kEpochMismatch,
      "the etcd register " + key + " belongs to a fleet with " + etcd::DescribeFleet(*decoded) +
          ", but this daemon has " + etcd::DescribeFleet(fleet) +
          ": set id.epoch to the fleet's, or use another register.etcd.prefix for a new fleet"));
}

std::string EtcdRegister::KnownBugNotice() noexcept {
  auto status = client_.Status();
  if (!status) return {};  // the claim that follows reports an outage itself
  NoteIdentity(status->cluster_id, status->revision);
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
  return "etcd " + status->version + " at " + client_.current_endpoint() +
         " revokes live leases after a stalled leader resumes (etcd-io/etcd#15247, fixed in "
         "3.4.31 and 3.5.13): a daemon may then lose its number, exit and claim anew. IDs stay "
         "unique; upgrade etcd to stop the restarts";
}

tl::expected<void, RegisterError> EtcdRegister::CheckNotRolledBack(
    const ClaimRequest& request, const etcd::RangeResult& answer,
    std::vector<std::string>& notices) noexcept {
  const RegisterIdentity& seen = request.last_seen;
  // The operators' restore fence as the store holds it now: its revision is what this host
  // records, so that only a newer fence can admit it past a later restore.
  const std::string restore_key = etcd::RestoreKey(options_.prefix);
  auto fence = client_.Range(restore_key);
  if (!fence) return tl::unexpected(Failure("cannot read " + restore_key, fence.error()));
  const int64_t fence_revision = fence->kvs.empty() ? 0 : fence->kvs[0].mod_revision;
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
  if (!fence->kvs.empty()) {
    auto record = DecodeRestoreAt(restore_key, fence->kvs[0].value);
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

namespace {

// "machine 3 (\"host-a\" on a.example, pid 812)": a held entry of List().
std::string NameHolder(const EtcdRegisterEntry& e) {
  return "machine " + std::to_string(e.machine) + " (" + HolderText(*e.holder) + ")";
}

std::string Names(const std::map<uint32_t, EtcdRegisterEntry>& holders) {
  std::string names;
  for (const auto& [n, e] : holders) names += (names.empty() ? "" : ", ") + NameHolder(e);
  return names;
}

}  // namespace

tl::expected<std::vector<std::string>, RegisterError> EtcdRegister::WaitForAcknowledgements(
    const std::map<uint32_t, EtcdRegisterEntry>& holders, int64_t fence) noexcept {
  try {
    std::map<uint32_t, EtcdRegisterEntry> waiting = holders;
    std::vector<std::string> ended_unacknowledged;
    const auto deadline = std::chrono::steady_clock::now() + options_.fence_ack_timeout;
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
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
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

tl::expected<int, RegisterError> EtcdRegister::RaiseMarks(
    const std::vector<uint32_t>& numbers, const std::map<uint32_t, EtcdRegisterEntry>& entries,
    int64_t above_unix_ms, bool holders_as_listed, uint64_t* cluster_id) noexcept {
  try {
    // The holder record's revision as listed (0: none), which a write may compare.
    const auto listed_holder = [&](uint32_t n) -> int64_t {
      const auto e = entries.find(n);
      return e == entries.end() ? 0 : e->second.holder_revision;
    };
    const auto holder_compare = [&](uint32_t n) {
      return Compare::ModRevision(etcd::MachineKey(options_.prefix, n), Compare::Result::kEqual,
                                  listed_holder(n));
    };
    // kInUse if n's holder record is no longer the listed one: a daemon claimed it after
    // the listing, reading its mark from before the fence, and issues from its own clock.
    const auto check_holder = [&](uint32_t n) -> tl::expected<void, RegisterError> {
      const std::string key = etcd::MachineKey(options_.prefix, n);
      auto now = client_.Range(key);
      if (!now) return tl::unexpected(Failure("cannot read " + key, now.error()));
      const int64_t revision = now->kvs.empty() ? 0 : now->kvs[0].mod_revision;
      if (revision == listed_holder(n)) return {};
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
    };
    // The record number n gets: at least the fence, never lower, its last holder kept.
    const auto record_for = [&](const std::optional<etcd::HighWaterRecord>& stored) {
      etcd::HighWaterRecord record{above_unix_ms, "", 0};
      if (stored) {
        record.unix_ms = std::max(stored->unix_ms, above_unix_ms);
        record.holder = stored->holder;
      }
      return record;
    };
    // One number alone, reading its mark anew each round (after a batch's compare failed).
    const auto raise_one = [&](uint32_t n) -> tl::expected<bool, RegisterError> {
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
        if (holders_as_listed) txn.compare.push_back(holder_compare(n));
        txn.success = {Op::Put(key, etcd::EncodeHighWater(record_for(stored)))};
        auto result = client_.Txn(txn);
        if (!result) return tl::unexpected(Failure("cannot raise " + key, result.error()));
        *cluster_id = result->cluster_id;
        if (result->succeeded) return !stored || stored->unix_ms < above_unix_ms;
        if (holders_as_listed) {
          if (auto same = check_holder(n); !same) return tl::unexpected(same.error());
        }
        if (round >= kRaiseRounds) {
          return tl::unexpected(Err(RegisterErrorCode::kInUse,
                                    key + " keeps changing (a live holder raises it): stop "
                                          "every daemon of the fleet and run this again"));
        }
      }
    };
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
        if (holders_as_listed) txn.compare.push_back(holder_compare(numbers[i]));
        txn.success.push_back(Op::Put(
            key,
            etcd::EncodeHighWater(record_for(has_mark ? entry->second.high_water : std::nullopt))));
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
        auto one = raise_one(numbers[i]);
        if (!one) return tl::unexpected(one.error());
        raised += *one ? 1 : 0;
      }
    }
    return raised;
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
    for (uint32_t n = 0; n <= kMaxMachine; ++n) {
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
    const etcd::RestoreRecord fence{above_unix_ms, cluster_id, NowUnixMs()};
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

tl::expected<void, RegisterError> EtcdRegister::CheckClaimRequest(
    const ClaimRequest& request) const {
  if (!options_.setup_error.empty()) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, options_.setup_error));
  }
  if (machine_) return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest, "already claimed"));
  if (request.holder_id.empty()) {
    return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest, "empty holder id"));
  }
  if (options_.first_machine > options_.last_machine || options_.last_machine > kMaxMachine) {
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

tl::expected<void, RegisterError> EtcdRegister::FreshLease(bool* lease_used) {
  if (!*lease_used) return {};
  if (lease_ != 0) {
    (void)client_.Revoke(lease_);
    lease_ = 0;
  }
  auto grant = client_.GrantLease(options_.lease_ttl_s);
  if (!grant) return tl::unexpected(Failure("cannot grant a lease", grant.error()));
  lease_ = grant->id;
  *lease_used = false;
  return {};
}

tl::expected<std::pair<etcd::RangeResult, etcd::RangeResult>, RegisterError>
EtcdRegister::ReadHoldersAndMarks(const ClaimRequest& request, bool first_look,
                                  std::vector<std::string>& notices) {
  auto read = RangeHoldersAndMarks();
  if (!read) return read;
  NoteIdentity(read->first.cluster_id, read->first.revision);
  if (first_look) {
    auto checked = CheckNotRolledBack(request, read->first, notices);
    if (!checked) return tl::unexpected(checked.error());
  }
  return read;
}

tl::expected<std::pair<etcd::RangeResult, etcd::RangeResult>, RegisterError>
EtcdRegister::RangeHoldersAndMarks() {
  const std::string machines_prefix = etcd::MachinesPrefix(options_.prefix);
  const std::string marks_prefix = etcd::HighWaterPrefix(options_.prefix);
  auto held = client_.Range(machines_prefix, etcd::PrefixEnd(machines_prefix));
  if (!held) return tl::unexpected(Failure("cannot list the holders", held.error()));
  auto marks = client_.Range(marks_prefix, etcd::PrefixEnd(marks_prefix));
  if (!marks) return tl::unexpected(Failure("cannot list the marks", marks.error()));
  return std::pair{std::move(*held), std::move(*marks)};
}

MachineClaim EtcdRegister::Adopt(uint32_t machine, FileLock host_lock, const std::string& holder_id,
                                 const ClaimTxn& txn, std::vector<std::string> notices) {
  machine_ = machine;
  machine_lock_ = std::move(host_lock);
  holder_id_ = holder_id;
  claim_mark_ = committed_ = attempted_max_ = mark_value_ = txn.mark;
  mark_revision_ = txn.mark_revision;
  keepalive_.Start(lease_, machine);
  return MachineClaim{.machine = machine,
                      .high_water_unix_ms = txn.mark,
                      .mark_writer = txn.mark_writer,
                      .claim_token = lease_,
                      .notices = std::move(notices)};
}

tl::expected<MachineClaim, RegisterError> EtcdRegister::Claim(
    const ClaimRequest& request) noexcept {
  try {
    if (auto checked = CheckClaimRequest(request); !checked) return tl::unexpected(checked.error());
    const etcd::FleetRecord fleet{request.epoch_unix_ms, etcd::LayoutName()};
    const std::string fleet_text = etcd::EncodeFleet(fleet);
    if (auto ok = EnsureFleet(fleet, fleet_text); !ok) return tl::unexpected(ok.error());

    // A fresh lease for every attempt that follows one whose claim transaction was sent
    // (and for every call): a claim that went unanswered may still be applied later, late
    // or out of order, and it would bind its number to the lease it named. Revoking that
    // lease first makes etcd refuse such a late put ("requested lease not found"), so it
    // can never bind a second number to the lease this holder keeps alive; it also frees a
    // record that attempt committed without hearing the answer.
    bool lease_used = true;
    if (auto leased = FreshLease(&lease_used); !leased) return tl::unexpected(leased.error());
    const std::string machines_prefix = etcd::MachinesPrefix(options_.prefix);
    const std::string record = etcd::EncodeHolder(etcd::HolderRecord{
        request.holder_id, options_.host, static_cast<int64_t>(getpid()), NowUnixMs()});
    std::minstd_rand jitter(static_cast<uint32_t>(getpid()) ^ static_cast<uint32_t>(NowUnixMs()));
    std::string last_failure;
    bool last_failure_was_outage = false;
    const std::filesystem::path host_lock_dir =
        options_.host_lock_dir.empty() ? HostLockDir() : options_.host_lock_dir;
    std::set<uint32_t> locked_here;  // numbers other daemons of this host hold
    std::vector<std::string> notices;
    if (auto known = KnownBugNotice(); !known.empty()) notices.push_back(std::move(known));

    for (int attempt = 0; attempt < options_.max_claim_attempts; ++attempt) {
      if (attempt > 0) {
        // Lost a race: let the winners' writes land before looking again.
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + jitter() % 20));
      }
      // 1. What is held, and which marks exist (linearizable ranges); the first look also
      //    checks that the store is not older than what this host saw.
      auto read = ReadHoldersAndMarks(request, attempt == 0, notices);
      if (!read) return tl::unexpected(read.error());
      auto snap = DecodeSnapshot(options_.prefix, read->first, read->second);
      if (!snap) return tl::unexpected(snap.error());

      // 2. The number to ask for (PickNumber: the policy and its order).
      const Pick pick =
          PickNumber(*snap, request, options_.first_machine, options_.last_machine, locked_here);
      if (!pick.machine) {
        return tl::unexpected(
            NoFreeNumber(HoldersIn(*snap, options_.first_machine, options_.last_machine),
                         snap->held.size(), locked_here, host_lock_dir, machines_prefix));
      }

      // The host-wide lock of the number, as every backend takes it: a daemon of this
      // host with another register (a static machine = N) must never serve N beside us.
      auto host_lock = AcquireMachineLock(host_lock_dir, *pick.machine);
      if (!host_lock) {
        if (host_lock.error().held_by_other) {
          locked_here.insert(*pick.machine);
          last_failure = "machine " + std::to_string(*pick.machine) +
                         " is held by another daemon of this host (" +
                         MachineLockPath(host_lock_dir, *pick.machine).string() + ")";
          last_failure_was_outage = false;
          --attempt;  // not a lost race: the next pick excludes the number
          continue;
        }
        return tl::unexpected(Err(RegisterErrorCode::kUnreadable, host_lock.error().message));
      }

      // 3. One transaction: the fleet record unchanged, the number still as we saw it;
      //    then put our record bound to our lease and read the number's mark. A lease a
      //    previous attempt's transaction named is revoked first (above).
      if (auto leased = FreshLease(&lease_used); !leased) return tl::unexpected(leased.error());
      lease_used = true;
      auto txn = CommitClaim(*pick.machine, pick.retake_revision, fleet, fleet_text, record);
      if (!txn) return tl::unexpected(txn.error());
      // An answered transaction can never apply later: its lease may serve the next attempt.
      if (txn->answered) lease_used = false;
      if (!txn->claimed) {
        last_failure = txn->retry_reason;
        last_failure_was_outage = txn->outage;
        continue;
      }
      return Adopt(*pick.machine, std::move(*host_lock), request.holder_id, *txn,
                   std::move(notices));
    }
    return tl::unexpected(Err(
        last_failure_was_outage ? RegisterErrorCode::kUnreachable : RegisterErrorCode::kUnreadable,
        "gave up claiming a machine number in " +
            Range(options_.first_machine, options_.last_machine) + " in the etcd register (" +
            location() + ") after " + std::to_string(options_.max_claim_attempts) +
            " attempts; the last: " + last_failure));
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

tl::expected<void, RegisterError> EtcdRegister::Renew() noexcept {
  if (!claim_lost()) return {};
  return tl::unexpected(RegisterError{
      RegisterErrorCode::kClaimLost,
      "the etcd lease of machine " + std::to_string(machine_.value_or(0)) +
          " is gone (expired or revoked while this daemon could not renew it): another "
          "holder may own the number now; stopping so that a restart claims anew"});
}

tl::expected<void, RegisterError> EtcdRegister::UpdateHighWater(int64_t unix_ms) noexcept {
  return Raise(unix_ms, WriteKind::kRaise);
}

tl::expected<void, RegisterError> EtcdRegister::RecordCleanStop(
    int64_t last_issued_unix_ms) noexcept {
  return Raise(last_issued_unix_ms, WriteKind::kCleanStop);
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

void EtcdRegister::NoteIdentity(uint64_t cluster_id, int64_t revision) noexcept {
  if (cluster_id != 0) identity_.cluster_id = cluster_id;
  identity_.revision = std::max(identity_.revision, revision);
}

tl::expected<void, RegisterError> EtcdRegister::AcknowledgeFence(int64_t fence_unix_ms) noexcept {
  if (fence_unix_ms <= fence_acknowledged_) return {};
  return Raise(fence_unix_ms, WriteKind::kAcknowledge);
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

RegisterError EtcdRegister::FenceFound(const MovedMark& moved, const char* what) const {
  return Err(RegisterErrorCode::kFenced,
             std::string("not written: an operator fenced machine ") + std::to_string(*machine_) +
                 " at " + FormatTimeText(moved.stored) + " (" +
                 etcd::HighWaterKey(options_.prefix, *machine_) +
                 " written without this holder's lease) while this holder went to " + what +
                 "; record the fence on this host, then write again");
}

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
    if (machine > kMaxMachine) {
      return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest,
                                "machine " + std::to_string(machine) + " is out of range 0-1023"));
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

}  // namespace snowflake::daemon
