// What the files of the etcd register share: its options and factory, its lifetime, how it
// names its store and its failures, the cluster identity it notes, and the range of the
// holders and marks that a claim and `register list` read. The jobs themselves are in
// etcd_register_claim.cc, etcd_register_marks.cc, etcd_register_commands.cc,
// etcd_keepalive.cc and etcd_snapshot.cc.

#include "register/etcd_register.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "register/etcd_json.h"

namespace snowflake::reg {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
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
  options.mark_reservation_ms = own.mark_reservation_ms;
  options.first_machine = common.first_machine;
  options.last_machine = common.last_machine;
  options.id_bits = common.id_bits;
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
      keepalive_(options_.client, options_.lease_ttl_s, clock()) {
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
    return RegisterError{RegisterErrorCode::kUnreachable,
                         "etcd unreachable at " + endpoints() + ": " + what + ": " + e.message};
  }
  return RegisterError{RegisterErrorCode::kUnreadable,
                       what + " in the etcd register (" + location() + "): " + e.message};
}

void EtcdRegister::NoteIdentity(uint64_t cluster_id, int64_t revision) noexcept {
  if (cluster_id != 0) identity_.cluster_id = cluster_id;
  identity_.revision = std::max(identity_.revision, revision);
}

tl::expected<etcd::RangeResult, RegisterError> EtcdRegister::Ranged(const std::string& from,
                                                                    const std::string& end,
                                                                    int64_t limit) {
  auto range = client_.Range(from, end, limit);
  if (!range) return tl::unexpected(Failure("cannot read " + from, range.error()));
  return std::move(*range);
}

tl::expected<etcd::RangeResult, RegisterError> EtcdRegister::RangeAll(const std::string& from,
                                                                      const std::string& end) {
  // In pages: one answer for 65,536 keys would be tens of megabytes, past what etcd and its
  // gateway send at once. Each page is a linearizable read of its own; the header is the
  // first page's.
  etcd::RangeResult all;
  std::string key = from;
  for (bool first = true;; first = false) {
    auto page = Ranged(key, end, kListPage);
    if (!page) return tl::unexpected(page.error());
    if (first) {
      all.cluster_id = page->cluster_id;
      all.revision = page->revision;
    }
    const bool more = page->more && !page->kvs.empty();
    if (more) key = page->kvs.back().key + std::string(1, '\0');
    for (auto& kv : page->kvs) all.kvs.push_back(std::move(kv));
    if (!more) break;
  }
  all.count = static_cast<int64_t>(all.kvs.size());
  return all;
}

tl::expected<std::pair<etcd::RangeResult, etcd::RangeResult>, RegisterError>
EtcdRegister::RangeHoldersAndMarks() {
  const std::string machines_prefix = etcd::MachinesPrefix(options_.prefix);
  const std::string marks_prefix = etcd::HighWaterPrefix(options_.prefix);
  auto held = RangeAll(machines_prefix, etcd::PrefixEnd(machines_prefix));
  if (!held) return tl::unexpected(held.error());
  auto marks = RangeAll(marks_prefix, etcd::PrefixEnd(marks_prefix));
  if (!marks) return tl::unexpected(marks.error());
  return std::pair{std::move(*held), std::move(*marks)};
}

tl::expected<void, RegisterError> EtcdRegister::Renew() noexcept {
  if (!claim_lost()) return {};
  return tl::unexpected(RegisterError{
      RegisterErrorCode::kClaimLost,
      "the etcd lease of machine " + std::to_string(machine_.value_or(0)) +
          " is gone (expired or revoked while this daemon could not renew it): another "
          "holder may own the number now; stopping so that a restart claims anew"});
}

}  // namespace snowflake::reg
