#include "daemon/base/toml_fields.h"

#include <sstream>

namespace snowflake::daemon {

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

}  // namespace snowflake::daemon
