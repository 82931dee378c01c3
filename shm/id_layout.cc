#include "snowflake/id_layout.h"

#include <charconv>
#include <cstdio>
#include <optional>

#include "snowflake/time_text.h"

namespace snowflake {
namespace {

// 4096000 -> "4,096,000". Appended a character at a time: GCC 12 at -O3 reports a false
// -Wrestrict on std::string::insert (GCC bug 105329).
std::string Grouped(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string Years(int time_bits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f",
                static_cast<double>(int64_t{1} << time_bits) / (365.2425 * 86'400'000));
  return text;
}

// "until 2095-09-07 (69.7 years after the epoch)"; the date only when it can be written.
std::string Until(int time_bits, int64_t epoch_unix_ms) {
  const int64_t offset = (int64_t{1} << time_bits) - 1;
  std::string until = "until ";
  if (epoch_unix_ms >= 0 && epoch_unix_ms <= kMaxTextUnixMs - offset) {
    until += FormatTimeText(epoch_unix_ms + offset).substr(0, 10) + " (";
  } else {
    until += "(";
  }
  return until + Years(time_bits) + " years after the epoch)";
}

std::string Presets(int64_t epoch_unix_ms) {
  std::string text = "the presets are ";
  bool first = true;
  for (const IdLayoutPreset& preset : kIdLayoutPresets) {
    if (!first) text += ", ";
    first = false;
    // Appended in steps: GCC 12 at -O3 reports a false -Wrestrict on `"\"" + std::string`
    // (GCC bug 105329).
    text += '"';
    text += preset.name;
    text += "\" = ";
    text += DescribeIdBits(preset.bits, epoch_unix_ms);
  }
  return text;
}

std::optional<int> Width(std::string_view text) {
  int value = 0;
  if (text.empty() || text.size() > 2) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// "41/16/6" or "time41-machine16-sequence6"; nullopt if it is neither.
std::optional<IdBits> Widths(std::string_view text) {
  std::string_view parts[3];
  const bool named = text.starts_with("time");
  const std::string_view separator = named ? "-" : "/";
  for (int i = 0; i < 3; ++i) {
    const size_t end = i < 2 ? text.find(separator) : text.size();
    if (end == std::string_view::npos) return std::nullopt;
    parts[i] = text.substr(0, end);
    text.remove_prefix(i < 2 ? end + 1 : end);
  }
  if (named) {
    static constexpr std::string_view kNames[3] = {"time", "machine", "sequence"};
    for (int i = 0; i < 3; ++i) {
      if (!parts[i].starts_with(kNames[i])) return std::nullopt;
      parts[i].remove_prefix(kNames[i].size());
    }
  }
  const auto time = Width(parts[0]), machine = Width(parts[1]), sequence = Width(parts[2]);
  if (!time || !machine || !sequence) return std::nullopt;
  return IdBits{*time, *machine, *sequence};
}

}  // namespace

std::string FormatIdBits(IdBits bits) {
  return std::to_string(bits.time) + "/" + std::to_string(bits.machine) + "/" +
         std::to_string(bits.sequence);
}

std::string IdBitsRecordName(IdBits bits) {
  return "time" + std::to_string(bits.time) + "-machine" + std::to_string(bits.machine) +
         "-sequence" + std::to_string(bits.sequence);
}

std::string DescribeIdBits(IdBits bits, int64_t epoch_unix_ms) {
  if (bits.machine < 0 || bits.machine > 31 || bits.sequence < 0 || bits.sequence > 40 ||
      bits.time < 0 || bits.time > 62) {
    return FormatIdBits(bits);
  }
  return FormatIdBits(bits) + ": " + Grouped(uint64_t{1} << bits.machine) + " hosts, " +
         Grouped((uint64_t{1} << bits.sequence) * 1000) + " IDs per second per host, " +
         Until(bits.time, epoch_unix_ms);
}

std::string IdBitsProblem(IdBits bits, int64_t epoch_unix_ms) {
  if (IsValidIdBits(bits)) return "";
  const std::string widths = "time " + std::to_string(bits.time) + " + machine " +
                             std::to_string(bits.machine) + " + sequence " +
                             std::to_string(bits.sequence);
  std::string why;
  if (bits.time < 0 || bits.machine < 0 || bits.sequence < 0) {
    why = widths + ": a width cannot be negative";
  } else if (bits.time + bits.machine + bits.sequence != 63) {
    why = widths + " = " + std::to_string(bits.time + bits.machine + bits.sequence) +
          " bits, not 63: the three share the 63 bits below the sign bit, so every bit more "
          "for hosts (machine) is a bit less for IDs per millisecond (sequence) or for the "
          "years the epoch lasts (time)";
  } else if (bits.time < kMinTimeBits) {
    why = "time " + std::to_string(bits.time) + " bits last only " +
          Until(bits.time, epoch_unix_ms) + ": a platform must not outlive its epoch; at least " +
          std::to_string(kMinTimeBits) + " bits, " + Until(kMinTimeBits, epoch_unix_ms);
  } else if (bits.time > kMaxTimeBits) {
    why = "time " + std::to_string(bits.time) + " bits last " + Years(bits.time) +
          " years, more than any platform needs, at the cost of hosts or IDs per second; at "
          "most " +
          std::to_string(kMaxTimeBits) + " bits (" + Years(kMaxTimeBits) + " years)";
  } else if (bits.machine < kMinMachineBits) {
    why = "machine " + std::to_string(bits.machine) + " bits: at least " +
          std::to_string(kMinMachineBits) + " bit, two hosts";
  } else if (bits.machine > kMaxMachineBits) {
    why = "machine " + std::to_string(bits.machine) +
          " bits = " + Grouped(uint64_t{1} << bits.machine) +
          " hosts, more than the register fences one record each; at most " +
          std::to_string(kMaxMachineBits) + " bits (" + Grouped(uint64_t{1} << kMaxMachineBits) +
          " hosts)";
  } else {  // the sequence is out of its bounds
    why = "sequence " + std::to_string(bits.sequence) +
          " bits = " + Grouped((uint64_t{1} << (bits.sequence > 40 ? 40 : bits.sequence)) * 1000) +
          " IDs per second per host" +
          (bits.sequence < kMinSequenceBits
               ? ": one busy client would outrun its host; at least " +
                     std::to_string(kMinSequenceBits) + " bits (" +
                     Grouped((uint64_t{1} << kMinSequenceBits) * 1000) + " per second)"
               : ": at most " + std::to_string(kMaxSequenceBits) + " bits");
  }
  return why + "; " + Presets(epoch_unix_ms);
}

tl::expected<IdBits, std::string> ParseIdBits(std::string_view text, int64_t epoch_unix_ms) {
  for (const IdLayoutPreset& preset : kIdLayoutPresets) {
    if (text == preset.name) return preset.bits;
  }
  const std::optional<IdBits> bits = Widths(text);
  if (!bits) {
    return tl::unexpected("layout \"" + std::string(text) +
                          "\" is neither a preset nor time/machine/sequence bits such as "
                          "\"41/16/6\"; " +
                          Presets(epoch_unix_ms));
  }
  if (!IsValidIdBits(*bits)) {
    return tl::unexpected("layout \"" + std::string(text) +
                          "\" is not a layout: " + IdBitsProblem(*bits, epoch_unix_ms));
  }
  return *bits;
}

std::string_view IdErrorMessage(IdError error) noexcept {
  switch (error) {
    case IdError::kMachineOutOfRange:
      return "machine number out of range: it must be below 2^machine bits of the layout";
    case IdError::kSequenceOutOfRange:
      return "sequence out of range: it must be below 2^sequence bits of the layout";
    case IdError::kTimeBeforeEpoch:
      return "time is before the epoch: IDs cannot carry a millisecond earlier than the epoch";
    case IdError::kTimeBeyondRange:
      return "time is beyond the range of the layout's time bits after the epoch: "
             "no more IDs can be numbered with this epoch";
    case IdError::kSignBitSet:
      return "not an ID: the sign bit (bit 63) is set, IDs are below 2^63";
    case IdError::kEpochOutOfRange:
      return "epoch out of range: it must be a non-negative Unix time in milliseconds";
    case IdError::kRangeReversed:
      return "the time range ends before it begins: its start must not be later than its end";
    case IdError::kBitsInvalid:
      return "not a layout: time, machine and sequence bits must add up to 63, each within "
             "its bounds (snowflake/id_layout.h)";
  }
  return "unknown ID error";
}

}  // namespace snowflake
