#include "util/toml_fields.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "snowflake/id_layout.h"
#include "snowflake/time_text.h"

namespace snowflake::util {

std::string_view TomlFields::TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

std::string TomlFields::Where(const toml::source_region& region) const {
  std::string out(source_);
  if (region.begin.line > 0) {
    // Appended in two steps: GCC 12 at -O3 reports a false -Wrestrict on
    // `":" + std::to_string(...)` (GCC bug 105329).
    out += ':';
    out += std::to_string(region.begin.line);
  }
  return out;
}

std::string TomlFields::Shown(const toml::node& node) {
  if (const auto* s = node.as_string()) return "\"" + s->get() + "\"";
  std::ostringstream out;
  node.visit([&](const auto& n) { out << n; });
  return out.str();
}

void TomlFields::Fail(const std::string& key, const toml::node& node,
                      const std::string& what) const {
  throw ConfigInvalid{Where(node.source()) + ": " + key + ": " + what};
}

void TomlFields::FailKey(const std::string& key, const toml::key& name,
                         const std::string& what) const {
  throw ConfigInvalid{Where(name.source()) + ": " + key + ": " + what};
}

void TomlFields::FailMissing(const std::string& key, const std::string& what) const {
  throw ConfigInvalid{std::string(source_) + ": " + key + ": " + what};
}

int64_t TomlFields::Integer(const std::string& key, const toml::node& node, int64_t min,
                            int64_t max, const std::string& range) const {
  const auto* v = node.as_integer();
  if (v == nullptr) Fail(key, node, "must be an integer, got " + std::string(TypeName(node)));
  if (v->get() < min || v->get() > max)
    Fail(key, node, "must be " + range + ", got " + Shown(node));
  return v->get();
}

const std::string& TomlFields::String(const std::string& key, const toml::node& node) const {
  const auto* v = node.as_string();
  if (v == nullptr) Fail(key, node, "must be a string, got " + std::string(TypeName(node)));
  return v->get();
}

std::filesystem::path TomlFields::Path(const std::string& key, const toml::node& node,
                                       bool may_be_empty) const {
  const std::string& s = String(key, node);
  if (s.empty() && may_be_empty) return {};
  if (s.empty() || s.front() != '/')
    Fail(key, node, "must be an absolute path, got " + Shown(node));
  return s;
}

const toml::table& TomlFields::Table(const std::string& key, const toml::node& node) const {
  const toml::table* table = node.as_table();
  if (table == nullptr) Fail(key, node, "must be a table, got " + std::string(TypeName(node)));
  return *table;
}

int64_t TomlFields::Epoch(const std::string& key, const toml::node& node) const {
  const std::string expected = "must be " + std::string(kTimeTextForms);
  int64_t unix_ms = 0;
  if (const auto* i = node.as_integer()) {
    unix_ms = i->get();
  } else if (node.is_date_time() || node.is_string()) {
    std::string text;
    if (const auto* s = node.as_string()) {
      text = s->get();
    } else {
      std::ostringstream out;
      out << *node.as_date_time();
      text = out.str();
    }
    auto parsed = ParseTimeText(text);
    if (!parsed) Fail(key, node, expected + "; got " + Shown(node) + ": " + parsed.error());
    unix_ms = *parsed;
  } else {
    Fail(key, node, expected + ", got " + std::string(TypeName(node)));
  }
  if (!IdLayout::Create(unix_ms)) {
    Fail(key, node, "must be at or after 1970-01-01T00:00:00Z, got " + Shown(node));
  }
  return unix_ms;
}

tl::expected<std::string, ConfigError> ReadConfigText(const std::filesystem::path& path) noexcept {
  try {
    // An ifstream opens a directory and reads it as empty: that would silently run on
    // the defaults instead of the operator's file.
    std::error_code ignored;
    if (std::filesystem::is_directory(path, ignored)) {
      return tl::unexpected(ConfigError{
          path.string() + ": cannot read the config file: it is a directory (name the file)"});
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return tl::unexpected(
          ConfigError{path.string() + ": cannot read the config file: " + std::strerror(errno)});
    }
    // Bounded: `--config /dev/zero` (or a log file named by mistake) must fail at once,
    // not grow the process until it runs out of memory.
    std::string text(kMaxConfigBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) {
      return tl::unexpected(
          ConfigError{path.string() + ": cannot read the config file: " + std::strerror(errno)});
    }
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes) {
      return tl::unexpected(ConfigError{
          path.string() + ": the config file is larger than " + std::to_string(kMaxConfigBytes) +
          " bytes; is it the right file? (snowflaked's config is a small TOML file)"});
    }
    return text;
  } catch (const std::exception& e) {
    return tl::unexpected(ConfigError{path.string() + ": " + e.what()});
  }
}

tl::expected<toml::table, ConfigError> ParseTomlText(std::string_view text,
                                                     std::string_view source) noexcept {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    return tl::unexpected(ConfigError{std::string(source) + ":" + std::to_string(begin.line) + ":" +
                                      std::to_string(begin.column) + ": " +
                                      std::string(e.description())});
  } catch (const std::exception& e) {
    return tl::unexpected(ConfigError{std::string(source) + ": " + e.what()});
  }
}

}  // namespace snowflake::util
