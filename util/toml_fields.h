// Reading a config file's TOML values with errors that name the file, the line and the
// key: the one grammar for the daemon's config (config/) and for each register backend's
// own [register] keys (register/), so every key fails the same way.
//
// TomlFields is a plain value; its readers throw ConfigInvalid, to be caught where a parse
// returns (ParseConfig(), a backend's Parse<Name>RegisterConfig()) and turned into a
// ConfigError. Safe to use from any thread on distinct objects.

#ifndef SNOWFLAKE_UTIL_TOML_FIELDS_H_
#define SNOWFLAKE_UTIL_TOML_FIELDS_H_

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake::util {

struct ConfigError {
  // One line: "<file>:<line>: <key>: <what is wrong>, got <value>", or
  // "<file>: <why it cannot be read>".
  std::string message;
};

// Thrown by TomlFields' readers; never leaves a parse function.
struct ConfigInvalid {
  std::string message;
};

class TomlFields {
 public:
  // `source` names the text in messages (a path, or "built-in defaults"); it must outlive
  // this object.
  explicit TomlFields(std::string_view source) : source_(source) {}

  std::string_view source() const { return source_; }

  // Throws "<source>:<line of node>: <key>: <what>".
  [[noreturn]] void Fail(const std::string& key, const toml::node& node,
                         const std::string& what) const;
  // Throws "<source>:<line>: <key>: <what>" for a key (its name's place in the file).
  [[noreturn]] void FailKey(const std::string& key, const toml::key& name,
                            const std::string& what) const;
  // Throws "<source>: <key>: <what>", for a key that is missing.
  [[noreturn]] void FailMissing(const std::string& key, const std::string& what) const;

  // An integer within min..max; `range` says so in words ("from 10 to 10000").
  int64_t Integer(const std::string& key, const toml::node& node, int64_t min, int64_t max,
                  const std::string& range) const;
  const std::string& String(const std::string& key, const toml::node& node) const;
  // An absolute path, or "" if may_be_empty.
  std::filesystem::path Path(const std::string& key, const toml::node& node,
                             bool may_be_empty) const;
  // The table `node` is, or a failure naming what it is instead.
  const toml::table& Table(const std::string& key, const toml::node& node) const;
  // A time in the one grammar of times (snowflake/time_text.h), as Unix ms at or after
  // 1970: an integer of ms, an RFC 3339 string, or a TOML date-time (written back as RFC
  // 3339 text and parsed like the string form and like snowflakectl's --epoch).
  int64_t Epoch(const std::string& key, const toml::node& node) const;

  // "<source>:<line>".
  std::string Where(const toml::source_region& region) const;
  // A value as a message shows it: strings quoted, others as TOML prints them.
  static std::string Shown(const toml::node& node);
  // "an integer", "a table", ...
  static std::string_view TypeName(const toml::node& node);

 private:
  std::string_view source_;
};

// The largest config file ReadConfigText() reads (the commented sample is about 3 KB).
inline constexpr size_t kMaxConfigBytes = 1024 * 1024;

// The whole text of the config file at `path`. Errors, each naming the path: it is a
// directory, it cannot be read (errno's text), or it is larger than kMaxConfigBytes (so
// `--config /dev/zero` fails at once instead of filling memory).
[[nodiscard]] tl::expected<std::string, ConfigError> ReadConfigText(
    const std::filesystem::path& path) noexcept;

// `text` parsed as TOML; `source` names it in errors ("<source>:<line>:<column>: <what>").
[[nodiscard]] tl::expected<toml::table, ConfigError> ParseTomlText(
    std::string_view text, std::string_view source) noexcept;

}  // namespace snowflake::util

#endif  // SNOWFLAKE_UTIL_TOML_FIELDS_H_
