#include "register/etcd_json.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace snowflake::reg::etcd {
namespace {

using nlohmann::json;

// Thrown inside this file only, to stop at the first thing that is not what the gateway
// sends; the public parsers turn it into a kMalformed Error.
struct Bad {
  std::string message;
};

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string Quote(std::string_view text) {
  std::string shown(text.substr(0, 80));
  if (text.size() > 80) shown += "...";
  return json(shown).dump(-1, ' ', true, json::error_handler_t::replace);
}

const json& Object(const json& j, std::string_view what) {
  if (!j.is_object()) throw Bad{std::string(what) + " is not a JSON object"};
  return j;
}

// An int64 field: absent = 0 (proto3 omits zeros), a decimal string, or a JSON integer.
int64_t Int64Field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return 0;
  if (it->is_string()) {
    const auto v = ParseInt64(it->get_ref<const std::string&>());
    if (!v)
      throw Bad{std::string("\"") + name + "\" is not an int64: " + Quote(it->get<std::string>())};
    return *v;
  }
  if (it->is_number_integer() && !it->is_number_unsigned()) return it->get<int64_t>();
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX))
      throw Bad{std::string("\"") + name + "\" exceeds int64"};
    return static_cast<int64_t>(u);
  }
  throw Bad{std::string("\"") + name + "\" must be an int64 string, got " + it->type_name()};
}

bool BoolField(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return false;
  if (!it->is_boolean())
    throw Bad{std::string("\"") + name + "\" must be a boolean, got " + it->type_name()};
  return it->get<bool>();
}

// A base64 bytes field: absent = "".
std::string BytesField(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return {};
  if (!it->is_string())
    throw Bad{std::string("\"") + name + "\" must be a base64 string, got " + it->type_name()};
  auto decoded = Base64Decode(it->get_ref<const std::string&>());
  if (!decoded)
    throw Bad{std::string("\"") + name + "\" is not base64: " + Quote(it->get<std::string>())};
  return std::move(*decoded);
}

std::string StringField(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return {};
  if (!it->is_string())
    throw Bad{std::string("\"") + name + "\" must be a string, got " + it->type_name()};
  return it->get<std::string>();
}

const json* OptionalObject(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  if (!it->is_object())
    throw Bad{std::string("\"") + name + "\" must be an object, got " + it->type_name()};
  return &*it;
}

const json* OptionalArray(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  if (!it->is_array())
    throw Bad{std::string("\"") + name + "\" must be an array, got " + it->type_name()};
  return &*it;
}

// A uint64 field (cluster and member ids): absent = 0, a decimal string or a JSON integer.
uint64_t Uint64Field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return 0;
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      throw Bad{std::string("\"") + name + "\" is not a uint64: " + Quote(text)};
    }
    return v;
  }
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  throw Bad{std::string("\"") + name + "\" must be a uint64 string, got " + it->type_name()};
}

int64_t HeaderRevision(const json& object) {
  const json* header = OptionalObject(object, "header");
  return header == nullptr ? 0 : Int64Field(*header, "revision");
}

// The header of a top-level answer (range, put, txn): etcd always sends it, with the
// store's revision (1 or more). A raise relies on that revision as the mark's new
// mod_revision, and a start compares it with the one it recorded: an answer without it is
// not an answer from etcd.
int64_t RequiredHeaderRevision(const json& object) {
  const json* header = OptionalObject(object, "header");
  if (header == nullptr) throw Bad{"the answer has no \"header\""};
  const int64_t revision = Int64Field(*header, "revision");
  if (revision <= 0) throw Bad{"the answer's header has no revision"};
  return revision;
}

uint64_t HeaderClusterId(const json& object) {
  const json* header = OptionalObject(object, "header");
  return header == nullptr ? 0 : Uint64Field(*header, "cluster_id");
}

RangeResult ParseRange(const json& object) {
  RangeResult out;
  out.revision = HeaderRevision(object);
  out.cluster_id = HeaderClusterId(object);
  if (const json* kvs = OptionalArray(object, "kvs")) {
    for (const json& item : *kvs) {
      Object(item, "an entry of \"kvs\"");
      KeyValue kv;
      kv.key = BytesField(item, "key");
      kv.value = BytesField(item, "value");
      kv.create_revision = Int64Field(item, "create_revision");
      kv.mod_revision = Int64Field(item, "mod_revision");
      kv.version = Int64Field(item, "version");
      kv.lease = Int64Field(item, "lease");
      out.kvs.push_back(std::move(kv));
    }
  }
  out.count = Int64Field(object, "count");
  out.more = BoolField(object, "more");
  if (out.count < static_cast<int64_t>(out.kvs.size())) {
    throw Bad{"\"count\" " + std::to_string(out.count) + " is below the " +
              std::to_string(out.kvs.size()) + " entries of \"kvs\""};
  }
  return out;
}

// etcd's error object: {"error": "...", "message": "...", "code": N}.
std::optional<Error> ErrorObject(int http_status, const json& object) {
  if (!object.is_object()) return std::nullopt;
  const bool has_error = object.contains("error") || object.contains("code");
  if (!has_error) return std::nullopt;
  Error e{ErrorKind::kRejected, 0, http_status, {}};
  const auto code = object.find("code");
  if (code != object.end() && code->is_number_integer()) {
    const int64_t c = code->get<int64_t>();
    e.grpc_code = c >= 0 && c <= 1000 ? static_cast<int>(c) : -1;
  }
  std::string text;
  if (const auto m = object.find("message"); m != object.end() && m->is_string()) {
    text = m->get<std::string>();
  } else if (const auto er = object.find("error"); er != object.end() && er->is_string()) {
    text = er->get<std::string>();
  }
  e.undecided = e.grpc_code == 2 && text.find("context deadline exceeded") != std::string::npos;
  const std::string what = "(code " + std::to_string(e.grpc_code) + ", HTTP " +
                           std::to_string(http_status) +
                           "): " + (text.empty() ? "no message" : text);
  e.message = "etcd refused " + what;
  // No leader, no quorum, a deadline: the member answered, but the cluster did not decide.
  // Calling that a refusal would send an operator after credentials instead of quorum.
  if (IsOutage(e)) e.message = "etcd could not decide " + what;
  return e;
}

// Parses `body`, turning etcd's errors and non-200 answers into Errors and anything that
// is not a JSON object into kMalformed; `parse` reads the object.
template <typename T, typename F>
tl::expected<T, Error> Parse(int http_status, std::string_view body, F&& parse) noexcept {
  try {
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      if (http_status != 200) {
        return tl::unexpected(Error{ErrorKind::kRejected, 0, http_status,
                                    "HTTP " + std::to_string(http_status) + ": " + Quote(body)});
      }
      return tl::unexpected(
          Error{ErrorKind::kMalformed, 0, http_status, "the answer is not JSON: " + Quote(body)});
    }
    if (auto e = ErrorObject(http_status, j)) {
      if (e->grpc_code == 0 && http_status == 200) {
        // "code": 0 is OK in gRPC terms, but no call of ours answers that way.
        e->kind = ErrorKind::kMalformed;
      }
      return tl::unexpected(std::move(*e));
    }
    if (http_status != 200) {
      return tl::unexpected(Error{ErrorKind::kRejected, 0, http_status,
                                  "HTTP " + std::to_string(http_status) + ": " + Quote(body)});
    }
    Object(j, "the answer");
    return parse(j);
  } catch (const Bad& b) {
    return tl::unexpected(Error{ErrorKind::kMalformed, 0, http_status, b.message});
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kMalformed, 0, http_status, e.what()});
  }
}

json KeyJson(std::string_view bytes) { return Base64Encode(bytes); }

json OpJson(const Op& op) {
  json body = json::object();
  body["key"] = KeyJson(op.key);
  switch (op.kind) {
    case Op::Kind::kPut:
      body["value"] = KeyJson(op.value);
      if (op.lease != 0) body["lease"] = std::to_string(op.lease);
      return json{{"request_put", body}};
    case Op::Kind::kRange:
      if (!op.range_end.empty()) body["range_end"] = KeyJson(op.range_end);
      if (op.limit > 0) body["limit"] = std::to_string(op.limit);
      return json{{"request_range", body}};
    case Op::Kind::kDelete:
      if (!op.range_end.empty()) body["range_end"] = KeyJson(op.range_end);
      return json{{"request_delete_range", body}};
  }
  return body;
}

json CompareJson(const Compare& c) {
  json body = json::object();
  body["key"] = KeyJson(c.key);
  static constexpr const char* kResults[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
  body["result"] = kResults[static_cast<int>(c.result)];
  switch (c.target) {
    case Compare::Target::kVersion:
      body["target"] = "VERSION";
      body["version"] = std::to_string(c.number);
      break;
    case Compare::Target::kCreate:
      body["target"] = "CREATE";
      body["create_revision"] = std::to_string(c.number);
      break;
    case Compare::Target::kMod:
      body["target"] = "MOD";
      body["mod_revision"] = std::to_string(c.number);
      break;
    case Compare::Target::kValue:
      body["target"] = "VALUE";
      body["value"] = KeyJson(c.value);
      break;
    case Compare::Target::kLease:
      body["target"] = "LEASE";
      body["lease"] = std::to_string(c.number);
      break;
  }
  return body;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                       (uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                       uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (rest == 2) v |= uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int s[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        s[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      s[k] = Sextet(c);
      if (s[k] < 0) return std::nullopt;
    }
    const uint32_t v =
        (uint32_t(s[0]) << 18) | (uint32_t(s[1]) << 12) | (uint32_t(s[2]) << 6) | uint32_t(s[3]);
    out += static_cast<char>((v >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::optional<int64_t> ParseInt64(std::string_view text) noexcept {
  if (text.empty()) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string PutBody(std::string_view key, std::string_view value, int64_t lease) {
  json body{{"key", KeyJson(key)}, {"value", KeyJson(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  return body.dump();
}

std::string RangeBody(std::string_view key, std::string_view range_end, int64_t limit) {
  json body{{"key", KeyJson(key)}};
  if (!range_end.empty()) body["range_end"] = KeyJson(range_end);
  if (limit > 0) body["limit"] = std::to_string(limit);
  return body.dump();
}

std::string TxnBody(const TxnRequest& txn) {
  json body = json::object();
  json compare = json::array();
  for (const Compare& c : txn.compare) compare.push_back(CompareJson(c));
  json success = json::array();
  for (const Op& op : txn.success) success.push_back(OpJson(op));
  json failure = json::array();
  for (const Op& op : txn.failure) failure.push_back(OpJson(op));
  body["compare"] = std::move(compare);
  body["success"] = std::move(success);
  body["failure"] = std::move(failure);
  return body.dump();
}

std::string LeaseGrantBody(int64_t ttl_s) { return json{{"TTL", std::to_string(ttl_s)}}.dump(); }
std::string LeaseIdBody(int64_t id) { return json{{"ID", std::to_string(id)}}.dump(); }
std::string LeaseTimeToLiveBody(int64_t id) { return LeaseIdBody(id); }

std::string AuthenticateBody(std::string_view name, std::string_view password) {
  return json{{"name", std::string(name)}, {"password", std::string(password)}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

tl::expected<PutResult, Error> ParsePutResponse(int http_status, std::string_view body) noexcept {
  return Parse<PutResult>(http_status, body,
                          [](const json& j) { return PutResult{RequiredHeaderRevision(j)}; });
}

tl::expected<RangeResult, Error> ParseRangeResponse(int http_status,
                                                    std::string_view body) noexcept {
  return Parse<RangeResult>(http_status, body, [](const json& j) {
    RangeResult out = ParseRange(j);
    out.revision = RequiredHeaderRevision(j);
    return out;
  });
}

tl::expected<TxnResult, Error> ParseTxnResponse(int http_status, std::string_view body) noexcept {
  return Parse<TxnResult>(http_status, body, [](const json& j) {
    TxnResult out;
    out.revision = RequiredHeaderRevision(j);
    out.cluster_id = HeaderClusterId(j);
    out.succeeded = BoolField(j, "succeeded");
    if (const json* responses = OptionalArray(j, "responses")) {
      for (const json& item : *responses) {
        Object(item, "an entry of \"responses\"");
        OpResult r;
        if (item.size() != 1) throw Bad{"an entry of \"responses\" must hold exactly one response"};
        if (const json* range = OptionalObject(item, "response_range")) {
          r.kind = Op::Kind::kRange;
          r.range = ParseRange(*range);
        } else if (const json* put = OptionalObject(item, "response_put")) {
          r.kind = Op::Kind::kPut;
          (void)put;
        } else if (const json* del = OptionalObject(item, "response_delete_range")) {
          r.kind = Op::Kind::kDelete;
          r.deleted = Int64Field(*del, "deleted");
        } else {
          throw Bad{"unknown response kind " + Quote(item.begin().key())};
        }
        out.responses.push_back(std::move(r));
      }
    }
    return out;
  });
}

tl::expected<LeaseGrant, Error> ParseLeaseGrantResponse(int http_status,
                                                        std::string_view body) noexcept {
  return Parse<LeaseGrant>(http_status, body, [](const json& j) {
    LeaseGrant out{Int64Field(j, "ID"), Int64Field(j, "TTL")};
    const std::string error = StringField(j, "error");
    if (!error.empty()) throw Bad{"lease grant failed: " + error};
    if (out.id == 0 || out.ttl_s <= 0) {
      throw Bad{"a lease grant without an ID or a TTL (ID " + std::to_string(out.id) + ", TTL " +
                std::to_string(out.ttl_s) + ")"};
    }
    return out;
  });
}

tl::expected<LeaseKeepAlive, Error> ParseLeaseKeepAliveResponse(int http_status,
                                                                std::string_view body) noexcept {
  // The streaming call wraps each message: {"result": {...}} or {"error": {...}}.
  try {
    const json j = json::parse(body, nullptr, false);
    if (!j.is_discarded() && j.is_object()) {
      if (const auto e = j.find("error"); e != j.end() && e->is_object()) {
        if (auto err = ErrorObject(http_status, *e)) return tl::unexpected(std::move(*err));
      }
    }
  } catch (const std::exception&) {
    // Parse() below reports it.
  }
  return Parse<LeaseKeepAlive>(http_status, body, [](const json& j) {
    const json* result = OptionalObject(j, "result");
    if (result == nullptr) throw Bad{"a keepalive answer without \"result\""};
    LeaseKeepAlive out{Int64Field(*result, "ID"), Int64Field(*result, "TTL")};
    if (out.ttl_s < 0) throw Bad{"a negative keepalive TTL " + std::to_string(out.ttl_s)};
    return out;
  });
}

tl::expected<LeaseTimeToLive, Error> ParseLeaseTimeToLiveResponse(int http_status,
                                                                  std::string_view body) noexcept {
  return Parse<LeaseTimeToLive>(http_status, body, [](const json& j) {
    LeaseTimeToLive out;
    out.id = Int64Field(j, "ID");
    // An absent TTL is 0 (proto3): expiring this very second, treated as gone.
    out.ttl_s = Int64Field(j, "TTL");
    out.granted_ttl_s = Int64Field(j, "grantedTTL");
    if (out.ttl_s < -1) throw Bad{"a lease TTL below -1: " + std::to_string(out.ttl_s)};
    return out;
  });
}

tl::expected<MemberStatus, Error> ParseStatusResponse(int http_status,
                                                      std::string_view body) noexcept {
  return Parse<MemberStatus>(http_status, body, [](const json& j) {
    MemberStatus out;
    out.version = StringField(j, "version");
    out.cluster_id = HeaderClusterId(j);
    out.revision = HeaderRevision(j);
    return out;
  });
}

tl::expected<void, Error> ParseEmptyResponse(int http_status, std::string_view body) noexcept {
  auto parsed = Parse<int>(http_status, body, [](const json&) { return 0; });
  if (!parsed) return tl::unexpected(std::move(parsed.error()));
  return {};
}

tl::expected<std::string, Error> ParseAuthenticateResponse(int http_status,
                                                           std::string_view body) noexcept {
  return Parse<std::string>(http_status, body, [](const json& j) {
    std::string token = StringField(j, "token");
    if (token.empty()) throw Bad{"an authentication answer without a token"};
    for (const char c : token) {
      if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) {
        throw Bad{"an authentication token with a control or space character"};
      }
    }
    return token;
  });
}

}  // namespace snowflake::reg::etcd
