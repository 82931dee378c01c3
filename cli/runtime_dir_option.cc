#include "runtime_dir_option.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "snowflake/client.h"

namespace snowflake::cli {
namespace {

constexpr const char* kName = "--runtime-dir";
constexpr const char* kHelp =
    "The daemon's runtime directory (default: $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked)";

}  // namespace

std::function<std::filesystem::path()> AddRuntimeDirOption(CLI::App& app, CLI::App& command) {
  CLI::Option* global = app.get_option_no_throw(kName);
  if (global == nullptr) global = app.add_option(kName, kHelp)->type_name("DIR");
  auto local = std::make_shared<std::string>();
  CLI::Option* own = command.add_option(kName, *local, kHelp)->type_name("DIR");
  return [global, own, local]() -> std::filesystem::path {
    if (own->count() > 0) return *local;
    if (global->count() > 0) return global->as<std::string>();
    return DefaultRuntimeDir();
  };
}

}  // namespace snowflake::cli
