#include "runtime_dir_option.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "exit_codes.h"
#include "snowflake/account_names.h"
#include "snowflake/client.h"

namespace snowflake::cli {
namespace {

constexpr const char* kName = "--runtime-dir";
constexpr const char* kHelp =
    "The daemon's runtime directory (default: $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked)";

}  // namespace

std::string RuntimeDir::Describe() const {
  return path.string() + (origin == "the default" ? " (the default)" : " (from " + origin + ")");
}

std::function<RuntimeDir()> AddRuntimeDirOption(CLI::App& app, CLI::App& command) {
  CLI::Option* global = app.get_option_no_throw(kName);
  if (global == nullptr) global = app.add_option(kName, kHelp)->type_name("DIR");
  auto local = std::make_shared<std::string>();
  CLI::Option* own = command.add_option(kName, *local, kHelp)->type_name("DIR");
  return [global, own, local]() -> RuntimeDir {
    if (own->count() > 0) return {*local, kName};
    if (global->count() > 0) return {global->as<std::string>(), kName};
    const char* env = std::getenv("SNOWFLAKE_RUNTIME_DIR");
    return {DefaultRuntimeDir(),
            env != nullptr && *env != '\0' ? "$SNOWFLAKE_RUNTIME_DIR" : "the default"};
  };
}

std::optional<CommandError> CheckRuntimeDir(const RuntimeDir& dir) {
  const std::string where = dir.Describe();
  struct stat info {};
  if (stat(dir.path.c_str(), &info) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return CommandError{
          kExitUnavailable, CodeName(vocab::ErrorCode::kDaemonNotRunning),
          "runtime directory " + where +
              " does not exist, so no snowflaked runs there: start snowflaked with this "
              "runtime directory, or name the one it uses with --runtime-dir or "
              "SNOWFLAKE_RUNTIME_DIR (a packaged daemon uses /run/snowflaked)"};
    }
    if (err == EACCES) {
      return CommandError{kExitUnavailable, CodeName(vocab::ErrorCode::kPermissionDenied),
                          "permission denied looking into the directories above " + where + " as " +
                              DescribeUser(geteuid())};
    }
    return CommandError{kExitUnavailable, CodeName(vocab::ErrorCode::kSystemError),
                        "cannot examine runtime directory " + where + ": " + std::strerror(err)};
  }
  if (!S_ISDIR(info.st_mode)) {
    return CommandError{kExitUsage, CodeName(vocab::ErrorCode::kUsage),
                        "runtime directory " + where +
                            " is not a directory: name the directory snowflaked runs in"};
  }
  if (access(dir.path.c_str(), X_OK) != 0 && errno == EACCES) {
    return CommandError{
        kExitUnavailable, CodeName(vocab::ErrorCode::kPermissionDenied),
        "permission denied entering runtime directory " + where + " (group " +
            DescribeGroupName(info.st_gid) + "): " + DescribeUser(geteuid()) + " is not in group " +
            GroupName(info.st_gid) + "; " +
            GroupAccessAdvice(info.st_gid, "run `sudo usermod -aG " + GroupName(info.st_gid) + " " +
                                               UserName(geteuid()) + "` and log in again")};
  }
  return std::nullopt;
}

}  // namespace snowflake::cli
