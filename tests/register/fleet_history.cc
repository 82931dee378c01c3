#include "fleet_history.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

namespace snowflake::testing {
namespace {

enum class KeyKind { kHolder, kMark, kOther };

struct ParsedKey {
  KeyKind kind = KeyKind::kOther;
  std::string number_id;  // "<prefix>|N"
};

// "<prefix>machines/N" or "<prefix>high-water/N", N decimal 0-1023 without leading zeros.
ParsedKey ParseKey(std::string_view key) {
  for (const auto& [segment, kind] :
       {std::pair<std::string_view, KeyKind>{"machines/", KeyKind::kHolder},
        {"high-water/", KeyKind::kMark}}) {
    const size_t at = key.rfind(segment);
    if (at == std::string_view::npos || (at > 0 && key[at - 1] != '/')) continue;
    const std::string_view digits = key.substr(at + segment.size());
    if (digits.empty() || digits.size() > 4 || (digits.size() > 1 && digits[0] == '0')) continue;
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || n > 1023) continue;
    return ParsedKey{kind, std::string(key.substr(0, at)) + "|" + std::string(digits)};
  }
  return ParsedKey{};
}

// An int64 of a record, which the register writes as a JSON number.
std::optional<int64_t> IntField(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  return std::nullopt;
}

// An int64 etcd's gateway sends as a string (proto3 JSON), absent when zero.
tl::expected<int64_t, std::string> GatewayInt(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string())
    return tl::unexpected(std::string(name) + " is neither a string nor a number");
  const std::string& text = it->get_ref<const std::string&>();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return tl::unexpected(std::string(name) + " is not an integer: " + text);
  }
  return value;
}

std::string Quote(std::string_view text) {
  std::string out = "\"";
  out += text.substr(0, 120);
  if (text.size() > 120) out += "...";
  return out + "\"";
}

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) |
                       (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint32_t(uint8_t(bytes[i + 2]));
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      uint32_t d = 0;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
      } else {
        if (pad > 0) return std::nullopt;  // data after padding
        const size_t at = kAlphabet.find(c);
        if (at == std::string_view::npos) return std::nullopt;
        d = static_cast<uint32_t>(at);
      }
      v = (v << 6) | d;
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

tl::expected<std::vector<HistoryEvent>, std::string> ParseWatchLine(std::string_view line) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return tl::unexpected("not a JSON object: " + Quote(line));
  }
  if (j.contains("error")) return tl::unexpected("the watch failed: " + Quote(line));
  const auto result = j.find("result");
  if (result == j.end() || !result->is_object()) {
    return tl::unexpected("no \"result\" in the watch answer: " + Quote(line));
  }
  if (result->value("canceled", false)) {
    return tl::unexpected("etcd cancelled the watch (compact_revision " +
                          result->value("compact_revision", std::string("0")) +
                          "): " + result->value("cancel_reason", std::string()));
  }
  std::vector<HistoryEvent> events;
  const auto list = result->find("events");
  if (list == result->end()) return events;
  if (!list->is_array()) return tl::unexpected("\"events\" is not an array: " + Quote(line));
  for (const auto& e : *list) {
    const auto kv = e.find("kv");
    if (!e.is_object() || kv == e.end() || !kv->is_object()) {
      return tl::unexpected("an event without \"kv\": " + Quote(e.dump()));
    }
    HistoryEvent event;
    event.deleted = e.value("type", std::string("PUT")) == "DELETE";
    auto key = Base64Decode(kv->value("key", std::string()));
    auto value = Base64Decode(kv->value("value", std::string()));
    if (!key || !value) return tl::unexpected("bad base64 in an event: " + Quote(e.dump()));
    event.key = std::move(*key);
    event.value = std::move(*value);
    auto revision = GatewayInt(*kv, "mod_revision");
    auto lease = GatewayInt(*kv, "lease");
    if (!revision) return tl::unexpected(revision.error());
    if (!lease) return tl::unexpected(lease.error());
    event.revision = *revision;
    event.lease = *lease;
    events.push_back(std::move(event));
  }
  return events;
}

void FleetHistory::Violate(std::string kind, const HistoryEvent& event, std::string detail) {
  violations_.push_back(
      HistoryViolation{std::move(kind), event.key, event.revision, std::move(detail)});
}

void FleetHistory::Add(const HistoryEvent& event) {
  ++counts_.events;
  if (event.revision < last_revision_) {
    Violate("revision_out_of_order", event,
            "revision " + std::to_string(event.revision) + " after " +
                std::to_string(last_revision_) + ": the history is not in etcd's order");
  }
  last_revision_ = std::max(last_revision_, event.revision);
  const ParsedKey key = ParseKey(event.key);
  if (key.kind == KeyKind::kOther) {
    ++counts_.other_events;
    return;
  }
  auto [it, inserted] = numbers_.try_emplace(key.number_id);
  if (inserted) ++counts_.numbers_seen;
  if (key.kind == KeyKind::kHolder) {
    AddHolder(event, it->second);
  } else {
    AddMark(event, it->second);
  }
}

void FleetHistory::AddHolder(const HistoryEvent& event, Number& number) {
  if (event.deleted) {
    if (number.holder) {
      holder_of_lease_.erase(number.holder->lease);
      number.holder.reset();
      --held_;
    }
    ++counts_.holder_deletes;
    return;
  }
  const auto record = nlohmann::json::parse(event.value, nullptr, false);
  if (record.is_discarded() || !record.is_object() || !record.contains("holder") ||
      !record["holder"].is_string()) {
    Violate("unreadable_value", event, "not a holder record: " + Quote(event.value));
    return;
  }
  Holder next{record["holder"].get<std::string>(), event.lease, event.revision};
  if (next.lease == 0) {
    Violate("holder_without_lease", event,
            "holder \"" + next.holder + "\" was put without a lease: nothing would ever free it");
  }
  if (number.holder) {
    if (number.holder->holder != next.holder) {
      Violate("double_holder", event,
              "given to \"" + next.holder + "\" (lease " + std::to_string(next.lease) +
                  ") while lease " + std::to_string(number.holder->lease) + " of \"" +
                  number.holder->holder + "\" still bound it (since revision " +
                  std::to_string(number.holder->revision) + ")");
    } else if (number.holder->lease != next.lease) {
      ++counts_.retakes;
    }
    holder_of_lease_.erase(number.holder->lease);
  } else {
    ++counts_.claims;
    ++held_;
    counts_.max_held = std::max(counts_.max_held, held_);
    if (number.mark && number.mark->lease != 0 && number.mark->holder != next.holder) {
      ++counts_.takeovers;
    }
  }
  if (next.lease != 0) {
    const auto [bound, fresh] = holder_of_lease_.try_emplace(next.lease, event.key);
    if (!fresh && bound->second != event.key) {
      Violate("lease_on_two_numbers", event,
              "lease " + std::to_string(next.lease) + " binds " + bound->second +
                  " already: one claim would serve two numbers");
    }
  }
  number.holder = std::move(next);
}

void FleetHistory::AddMark(const HistoryEvent& event, Number& number) {
  if (event.deleted) {
    Violate("mark_deleted", event,
            "the mark was deleted (it was " +
                (number.mark ? std::to_string(number.mark->unix_ms) : std::string("absent")) +
                "): a next holder would start from nothing");
    number.mark.reset();
    return;
  }
  ++counts_.mark_writes;
  const auto record = nlohmann::json::parse(event.value, nullptr, false);
  const auto unix_ms = record.is_object() ? IntField(record, "unix_ms") : std::nullopt;
  if (!unix_ms) {
    Violate("unreadable_value", event, "not a high-water record: " + Quote(event.value));
    return;
  }
  Mark next{*unix_ms, record.value("holder", std::string()), IntField(record, "lease").value_or(0),
            event.revision};
  if (number.mark && next.unix_ms < number.mark->unix_ms) {
    Violate("mark_down", event,
            "the mark went down from " + std::to_string(number.mark->unix_ms) + " (revision " +
                std::to_string(number.mark->revision) + ", lease " +
                std::to_string(number.mark->lease) + ") to " + std::to_string(next.unix_ms) +
                " (lease " + std::to_string(next.lease) + ")");
  }
  // A mark carrying a lease was written by that claim's raise or clean stop, whose
  // transaction compares machines/N's lease with it. (Lease 0: an operator's raise-all or
  // release, which the simulation never runs; it is not a holder's write.)
  if (next.lease != 0 && (!number.holder || number.holder->lease != next.lease)) {
    Violate("mark_written_without_the_claim", event,
            "written under lease " + std::to_string(next.lease) + " while machines/N is " +
                (number.holder ? "bound to lease " + std::to_string(number.holder->lease) +
                                     " of \"" + number.holder->holder + "\""
                               : std::string("free")));
  }
  number.mark = std::move(next);
}

}  // namespace snowflake::testing
