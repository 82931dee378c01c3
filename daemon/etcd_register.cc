#include "daemon/etcd_register.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "daemon/config.h"
#include "daemon/etcd_json.h"
#include "daemon/time_text.h"

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
  return first == last ? std::to_string(first)
                       : std::to_string(first) + "-" + std::to_string(last);
}

// Everything under the prefix that the claim needs, parsed. Anything that is not ours
// under machines/ or high-water/ stops the claim: guessing around it could reuse a
// number whose mark we cannot read.
struct Snapshot {
  struct Held {
    etcd::HolderRecord record;
    int64_t mod_revision = 0;
    int64_t lease = 0;
  };
  std::map<uint32_t, Held> held;
  std::map<uint32_t, std::pair<etcd::HighWaterRecord, int64_t>> marks;  // record, mod_revision
};

std::string CorruptText(const std::string& key, const std::string& why) {
  return "etcd key " + key + " holds a value snowflaked did not write (" + why +
         "): inspect it with `etcdctl get " + key +
         "`; delete it only if no daemon ever held that number (a high-water mark is what "
         "keeps a number's IDs unique)";
}

}  // namespace

EtcdRegisterOptions EtcdRegisterOptionsFrom(const Config& config) {
  const Config::Register& reg = config.machine_register;
  EtcdRegisterOptions options;
  options.client.endpoints = reg.etcd.endpoints;
  options.client.connect_timeout_ms = reg.etcd.connect_timeout_ms;
  options.client.request_timeout_ms = reg.etcd.request_timeout_ms;
  options.client.ca_file = reg.etcd.ca_file.string();
  options.client.cert_file = reg.etcd.cert_file.string();
  options.client.key_file = reg.etcd.key_file.string();
  options.client.user = reg.etcd.user;
  options.client.password = reg.etcd.password;
  options.prefix = reg.etcd.prefix;
  options.lease_ttl_s = reg.etcd.lease_ttl_s;
  options.first_machine = reg.first_machine;
  options.last_machine = reg.last_machine;
  if (!reg.etcd.password_file.empty()) {
    std::ifstream in(reg.etcd.password_file);
    std::string password;
    if (!in || !std::getline(in, password)) {
      options.setup_error = "cannot read register.etcd.password_file " +
                            reg.etcd.password_file.string() + ": " +
                            (in ? std::string("it is empty") : std::strerror(errno));
    }
    if (!password.empty() && password.back() == '\r') password.pop_back();
    options.client.password = password;
  }
  return options;
}

EtcdRegister::EtcdRegister(EtcdRegisterOptions options)
    : options_(std::move(options)), client_(options_.client) {
  if (options_.host.empty()) options_.host = HostName();
}

EtcdRegister::~EtcdRegister() {
  StopKeepAlive();
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
    return tl::unexpected(Err(RegisterErrorCode::kCorrupt, "the fleet record " + key +
                                                               " vanished inside a transaction"));
  }
  const std::string& stored = result->responses[0].range.kvs[0].value;
  if (stored == fleet_text) return {};
  auto decoded = etcd::DecodeFleet(stored);
  if (!decoded) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(key, decoded.error())));
  return tl::unexpected(Err(
      RegisterErrorCode::kEpochMismatch,
      "the etcd register " + key + " belongs to a fleet with " + etcd::DescribeFleet(*decoded) +
          ", but this daemon has " + etcd::DescribeFleet(fleet) +
          ": set id.epoch to the fleet's, or use another register.etcd.prefix for a new fleet"));
}

tl::expected<MachineClaim, RegisterError> EtcdRegister::Claim(
    const ClaimRequest& request) noexcept {
  try {
    if (!options_.setup_error.empty()) {
      return tl::unexpected(Err(RegisterErrorCode::kUnreadable, options_.setup_error));
    }
    if (machine_) return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest, "already claimed"));
    if (request.holder_id.empty()) {
      return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest, "empty holder id"));
    }
    if (options_.first_machine > options_.last_machine || options_.last_machine > kMaxMachine) {
      return tl::unexpected(Err(RegisterErrorCode::kInvalidRequest,
                                "bad machine range " + Range(options_.first_machine,
                                                             options_.last_machine)));
    }
    const etcd::FleetRecord fleet{request.epoch_unix_ms, etcd::LayoutName()};
    const std::string fleet_text = etcd::EncodeFleet(fleet);
    if (auto ok = EnsureFleet(fleet, fleet_text); !ok) return tl::unexpected(ok.error());

    // A fresh lease for every call: one granted by an earlier call that failed (etcd
    // became unreachable half-way) may have expired since. Revoking it also frees a record
    // that call may have committed without hearing the answer (this holder's own: the
    // listing below would find it either way).
    if (lease_ != 0) {
      (void)client_.Revoke(lease_);
      lease_ = 0;
    }
    auto grant = client_.GrantLease(options_.lease_ttl_s);
    if (!grant) return tl::unexpected(Failure("cannot grant a lease", grant.error()));
    lease_ = grant->id;
    const std::string machines_prefix = etcd::MachinesPrefix(options_.prefix);
    const std::string marks_prefix = etcd::HighWaterPrefix(options_.prefix);
    const std::string record = etcd::EncodeHolder(etcd::HolderRecord{
        request.holder_id, options_.host, static_cast<int64_t>(getpid()), NowUnixMs()});
    std::minstd_rand jitter(static_cast<uint32_t>(getpid()) ^
                            static_cast<uint32_t>(NowUnixMs()));
    std::string last_failure;
    bool last_failure_was_outage = false;

    for (int attempt = 0; attempt < options_.max_claim_attempts; ++attempt) {
      if (attempt > 0) {
        // Lost a race: let the winners' writes land before looking again.
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + jitter() % 20));
      }
      // 1. What is held, and which marks exist (linearizable ranges).
      auto held = client_.Range(machines_prefix, etcd::PrefixEnd(machines_prefix));
      if (!held) return tl::unexpected(Failure("cannot list the holders", held.error()));
      auto marks = client_.Range(marks_prefix, etcd::PrefixEnd(marks_prefix));
      if (!marks) return tl::unexpected(Failure("cannot list the marks", marks.error()));
      Snapshot snap;
      for (const auto& kv : held->kvs) {
        const auto n = etcd::MachineOfKey(machines_prefix, kv.key);
        if (!n) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, "not a machine number")));
        auto rec = etcd::DecodeHolder(kv.value);
        if (!rec) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, rec.error())));
        snap.held[*n] = Snapshot::Held{std::move(*rec), kv.mod_revision, kv.lease};
      }
      for (const auto& kv : marks->kvs) {
        const auto n = etcd::MachineOfKey(marks_prefix, kv.key);
        if (!n) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, "not a machine number")));
        auto rec = etcd::DecodeHighWater(kv.value);
        if (!rec) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, rec.error())));
        snap.marks[*n] = {std::move(*rec), kv.mod_revision};
      }

      // 2. The number to ask for: our own held record, else a free number whose last
      //    holder was us, else the lowest free number no other holder remembers, else the
      //    lowest free number.
      std::optional<uint32_t> pick;
      std::optional<int64_t> retake_revision;
      for (const auto& [n, h] : snap.held) {
        if (n >= options_.first_machine && n <= options_.last_machine &&
            h.record.holder == request.holder_id) {
          pick = n;
          retake_revision = h.mod_revision;
          break;
        }
      }
      size_t holders_in_range = 0;
      for (uint32_t n = options_.first_machine; n <= options_.last_machine; ++n) {
        if (snap.held.contains(n)) ++holders_in_range;
      }
      if (!pick) {
        for (const auto& [n, m] : snap.marks) {
          if (n >= options_.first_machine && n <= options_.last_machine &&
              !snap.held.contains(n) && m.first.holder == request.holder_id) {
            pick = n;
            break;
          }
        }
      }
      if (!pick) {
        // A number no holder remembers first, so a holder that is restarting elsewhere
        // finds its own number still free; only then the lowest free one.
        for (int pass = 0; pass < 2 && !pick; ++pass) {
          for (uint32_t n = options_.first_machine; n <= options_.last_machine; ++n) {
            if (snap.held.contains(n)) continue;
            const auto mark = snap.marks.find(n);
            const bool remembered = mark != snap.marks.end() && !mark->second.first.holder.empty();
            if (pass == 1 || !remembered) {
              pick = n;
              break;
            }
          }
        }
      }
      if (!pick) {
        return tl::unexpected(Err(
            RegisterErrorCode::kNoFreeNumber,
            "no free machine number in " + Range(options_.first_machine, options_.last_machine) +
                " in the etcd register (" + location() + "): all " +
                std::to_string(options_.last_machine - options_.first_machine + 1) +
                " are held (" + std::to_string(holders_in_range) + " holders in range, " +
                std::to_string(snap.held.size()) + " under " + machines_prefix +
                "); widen register.machines or stop a daemon of another host"));
      }

      // 3. One transaction: the fleet record unchanged, the number still as we saw it;
      //    then put our record bound to our lease and read the number's mark.
      const std::string machine_key = etcd::MachineKey(options_.prefix, *pick);
      const std::string mark_key = etcd::HighWaterKey(options_.prefix, *pick);
      etcd::TxnRequest txn;
      txn.compare = {Compare::ValueEquals(etcd::ConfigKey(options_.prefix), fleet_text),
                     retake_revision ? Compare::ModRevision(machine_key, Compare::Result::kEqual,
                                                            *retake_revision)
                                     : Compare::KeyAbsent(machine_key)};
      txn.success = {Op::Put(machine_key, record, lease_), Op::Get(mark_key)};
      txn.failure = {Op::Get(etcd::ConfigKey(options_.prefix))};
      auto result = client_.Txn(txn);
      if (!result) {
        if (result.error().kind == ErrorKind::kUnavailable) {
          // Maybe applied: the next listing shows our record if it was, and we retake it.
          last_failure = result.error().message;
          last_failure_was_outage = true;
          continue;
        }
        if (result.error().kind == ErrorKind::kRejected && result.error().grpc_code == 5) {
          // "requested lease not found": our lease expired between the grant and the
          // claim (a loaded host, a long election). Nothing was written; a new lease.
          auto regrant = client_.GrantLease(options_.lease_ttl_s);
          if (!regrant) return tl::unexpected(Failure("cannot grant a lease", regrant.error()));
          lease_ = regrant->id;
          last_failure = result.error().message;
          last_failure_was_outage = false;
          continue;
        }
        return tl::unexpected(Failure("cannot claim machine " + std::to_string(*pick),
                                          result.error()));
      }
      if (!result->succeeded) {
        const auto& fail = result->responses;
        if (fail.size() == 1 && (fail[0].range.kvs.empty() || fail[0].range.kvs[0].value != fleet_text)) {
          // The fleet record changed under us: report it as EnsureFleet would.
          if (auto ok = EnsureFleet(fleet, fleet_text); !ok) return tl::unexpected(ok.error());
        }
        last_failure = "machine " + std::to_string(*pick) + " was taken by another daemon first";
        last_failure_was_outage = false;
        continue;
      }
      if (result->responses.size() != 2) {
        return tl::unexpected(Err(RegisterErrorCode::kCorrupt,
                                  "a claim transaction answered with " +
                                      std::to_string(result->responses.size()) + " results, not 2"));
      }
      int64_t mark = 0;
      const auto& mark_kvs = result->responses[1].range.kvs;
      if (!mark_kvs.empty()) {
        auto rec = etcd::DecodeHighWater(mark_kvs[0].value);
        if (!rec) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(mark_key, rec.error())));
        mark = rec->unix_ms;
      }
      machine_ = *pick;
      holder_id_ = request.holder_id;
      claim_mark_ = committed_ = attempted_max_ = mark;
      keepalive_ = std::thread([this] { KeepAliveLoop(); });
      return MachineClaim{*pick, mark};
    }
    return tl::unexpected(Err(last_failure_was_outage ? RegisterErrorCode::kUnreachable
                                                      : RegisterErrorCode::kUnreadable,
                              "gave up claiming a machine number in " +
                                  Range(options_.first_machine, options_.last_machine) +
                                  " in the etcd register (" + location() + ") after " +
                                  std::to_string(options_.max_claim_attempts) +
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
  return Raise(unix_ms, /*clean_stop=*/false);
}

tl::expected<void, RegisterError> EtcdRegister::RecordCleanStop(
    int64_t last_issued_unix_ms) noexcept {
  return Raise(last_issued_unix_ms, /*clean_stop=*/true);
}

tl::expected<void, RegisterError> EtcdRegister::Raise(int64_t unix_ms, bool clean_stop) noexcept {
  try {
    if (!machine_) return tl::unexpected(Err(RegisterErrorCode::kNotClaimed, "not claimed"));
    const std::string machine_key = etcd::MachineKey(options_.prefix, *machine_);
    if (claim_lost()) {
      std::lock_guard lock(mutex_);
      return tl::unexpected(Err(RegisterErrorCode::kClaimLost, lost_reason_));
    }
    // A raise writes at least every earlier attempt (one that timed out may have
    // committed), so the stored mark only rises. A clean stop writes what was issued,
    // never below the mark this claim started above.
    const int64_t target =
        clean_stop ? std::max(unix_ms, claim_mark_) : std::max(unix_ms, attempted_max_);
    if (!clean_stop && target <= committed_) return {};
    if (!clean_stop) attempted_max_ = target;
    etcd::TxnRequest txn;
    txn.compare = {Compare::Lease(machine_key, lease_)};
    txn.success = {Op::Put(etcd::HighWaterKey(options_.prefix, *machine_),
                           etcd::EncodeHighWater(etcd::HighWaterRecord{target, holder_id_}))};
    txn.failure = {Op::Get(machine_key)};
    auto result = client_.Txn(txn);
    if (!result) {
      return tl::unexpected(Failure(
          "not committed: cannot raise the high-water mark of machine " +
              std::to_string(*machine_) + " to " + FormatIsoUtc(target),
          result.error()));
    }
    if (!result->succeeded) {
      std::string now_held = "nobody holds it now";
      if (result->responses.size() == 1 && !result->responses[0].range.kvs.empty()) {
        const auto& kv = result->responses[0].range.kvs[0];
        auto rec = etcd::DecodeHolder(kv.value);
        now_held = rec ? "it is held by \"" + rec->holder + "\" on " + rec->host + " now"
                       : "it holds an unreadable record now";
      }
      const std::string reason = "machine " + std::to_string(*machine_) +
                                 " is no longer ours in the etcd register (" + machine_key +
                                 " is not bound to our lease " + std::to_string(lease_) + "; " +
                                 now_held + "): stop serving and claim anew";
      {
        std::lock_guard lock(mutex_);
        lost_reason_ = reason;
      }
      claim_lost_.store(true, std::memory_order_release);
      return tl::unexpected(Err(RegisterErrorCode::kClaimLost, reason));
    }
    committed_ = clean_stop ? target : std::max(committed_, target);
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(Err(RegisterErrorCode::kUnreadable, e.what()));
  }
}

void EtcdRegister::KeepAliveLoop() {
  etcd::EtcdClient client(options_.client);
  const auto period = std::chrono::milliseconds(std::max<int64_t>(options_.lease_ttl_s * 1000 / 3, 200));
  const auto retry = std::chrono::milliseconds(std::max<int64_t>(options_.lease_ttl_s * 1000 / 10, 100));
  auto wait = period;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, wait, [this] { return stop_; })) return;
    }
    auto answer = client.KeepAlive(lease_);
    if (answer && !answer->alive()) {
      std::lock_guard lock(mutex_);
      lost_reason_ = "the lease " + std::to_string(lease_) + " of machine " +
                     std::to_string(*machine_) +
                     " expired in the etcd register (etcd was unreachable for longer than "
                     "register.etcd.lease_ttl_s, or the lease was revoked): stop serving and "
                     "claim anew";
      claim_lost_.store(true, std::memory_order_release);
      return;
    }
    // Unanswered: try again soon, the lease is still running out.
    wait = answer ? period : retry;
  }
}

void EtcdRegister::StopKeepAlive() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
}

tl::expected<std::vector<EtcdRegisterEntry>, RegisterError> EtcdRegister::List() noexcept {
  try {
    const std::string machines_prefix = etcd::MachinesPrefix(options_.prefix);
    const std::string marks_prefix = etcd::HighWaterPrefix(options_.prefix);
    auto held = client_.Range(machines_prefix, etcd::PrefixEnd(machines_prefix));
    if (!held) return tl::unexpected(Failure("cannot list the holders", held.error()));
    auto marks = client_.Range(marks_prefix, etcd::PrefixEnd(marks_prefix));
    if (!marks) return tl::unexpected(Failure("cannot list the marks", marks.error()));
    std::map<uint32_t, EtcdRegisterEntry> entries;
    for (const auto& kv : held->kvs) {
      const auto n = etcd::MachineOfKey(machines_prefix, kv.key);
      if (!n) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, "not a machine number")));
      auto rec = etcd::DecodeHolder(kv.value);
      if (!rec) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, rec.error())));
      EtcdRegisterEntry& e = entries[*n];
      e.machine = *n;
      e.holder = std::move(*rec);
      e.lease = kv.lease;
      if (kv.lease != 0) {
        auto ttl = client_.TimeToLive(kv.lease);
        if (!ttl) return tl::unexpected(Failure("cannot read a lease", ttl.error()));
        e.lease_ttl_left_s = ttl->ttl_s;
      }
    }
    for (const auto& kv : marks->kvs) {
      const auto n = etcd::MachineOfKey(marks_prefix, kv.key);
      if (!n) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, "not a machine number")));
      auto rec = etcd::DecodeHighWater(kv.value);
      if (!rec) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(kv.key, rec.error())));
      EtcdRegisterEntry& e = entries[*n];
      e.machine = *n;
      e.high_water = std::move(*rec);
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
          auto rec = etcd::DecodeHolder(kv.value);
          return tl::unexpected(Err(
              RegisterErrorCode::kInUse,
              "machine " + std::to_string(machine) + " is held by a live daemon" +
                  (rec ? " (\"" + rec->holder + "\" on " + rec->host + ", pid " +
                             std::to_string(rec->pid) + ")"
                       : std::string()) +
                  " whose lease has " + std::to_string(ttl->ttl_s) +
                  " s left: stop that daemon first"));
        }
      }
      // Only if nobody re-claimed it meanwhile.
      txn.compare.push_back(Compare::ModRevision(machine_key, Compare::Result::kEqual, kv.mod_revision));
      txn.success.push_back(Op::Delete(machine_key));
    }
    if (!mark->kvs.empty()) {
      const auto& kv = mark->kvs[0];
      auto rec = etcd::DecodeHighWater(kv.value);
      if (!rec) return tl::unexpected(Err(RegisterErrorCode::kCorrupt, CorruptText(mark_key, rec.error())));
      if (!rec->holder.empty()) {
        // Keep the mark exactly; forget who set it. The comparison makes sure a raise that
        // lands meanwhile is not undone.
        txn.compare.push_back(Compare::ModRevision(mark_key, Compare::Result::kEqual, kv.mod_revision));
        txn.success.push_back(Op::Put(mark_key, etcd::EncodeHighWater({rec->unix_ms, ""})));
      }
    }
    if (txn.success.empty()) return {};
    auto result = client_.Txn(txn);
    if (!result) return tl::unexpected(Failure("cannot release machine " + std::to_string(machine), result.error()));
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
