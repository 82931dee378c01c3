#include "epoch_choice.h"

#include "snowflake/client.h"

namespace snowflake::cli {
namespace {

std::string Describe(int64_t epoch_unix_ms) {
  return FormatTimeText(epoch_unix_ms) + " (" + std::to_string(epoch_unix_ms) + ")";
}

}  // namespace

tl::expected<IdLayout, std::string> ParseEpoch(std::string_view text) noexcept {
  try {
    auto bad = [&](const std::string& why) {
      return tl::unexpected("bad epoch '" + std::string(text) + "': " + why + "; expected " +
                            std::string(kTimeTextForms));
    };
    auto parsed = ParseTimeText(text);
    if (!parsed) return bad(parsed.error());
    if (*parsed < 0) {
      return bad(text.front() == '-' ? "it is negative (before 1970)" : "it is before 1970");
    }
    if (*parsed > kMaxEpochUnixMs) {
      return bad(
          "too late: IDs of it would carry times after the year 9999 (the latest epoch "
          "is " +
          std::to_string(kMaxEpochUnixMs) + ")");
    }
    return IdLayout::Create(*parsed).value();  // in range: checked above
  } catch (...) {
    return tl::unexpected(std::string("out of memory"));
  }
}

tl::expected<EpochChoice, std::string> ChooseEpoch(
    const std::optional<std::string>& text,
    const std::optional<std::filesystem::path>& runtime_dir) noexcept {
  try {
    if (text) {
      auto layout = ParseEpoch(*text);
      if (!layout) return tl::unexpected(layout.error());
      return EpochChoice{*layout, "option",
                         Describe(layout->epoch_unix_ms()) + ", given by --epoch"};
    }
    std::string why_default = "the default epoch";
    if (runtime_dir) {
      ClientOptions options;
      options.runtime_dir = *runtime_dir;
      auto segment = Client::Inspect(options);
      if (segment) {
        if (auto layout = IdLayout::Create(segment->epoch_unix_ms)) {
          return EpochChoice{*layout, "daemon",
                             Describe(segment->epoch_unix_ms) + ", the epoch of the daemon in " +
                                 runtime_dir->string()};
        }
      }
      why_default += " (no daemon's segment readable in " + runtime_dir->string() +
                     "; pass --epoch if your fleet uses another)";
    }
    return EpochChoice{IdLayout(), "default", Describe(kDefaultEpochUnixMs) + ", " + why_default};
  } catch (...) {
    return tl::unexpected(std::string("out of memory"));
  }
}

}  // namespace snowflake::cli
