#include "next_command.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <memory>
#include <vector>

#include "exit_codes.h"
#include "runtime_dir_option.h"

namespace snowflake::cli {
namespace {

constexpr size_t kBatch = 8192;
// 20 digits + newline per ID at most; flushed when less than a batch's worth is left.
constexpr size_t kOutputBytes = 1 << 20;
constexpr size_t kMaxLine = 21;

}  // namespace

int RunNext(Client& client, uint64_t count, std::FILE* out, std::FILE* err) noexcept {
  std::vector<uint64_t> ids;
  std::vector<char> text;
  try {
    ids.resize(kBatch);
    text.resize(kOutputBytes);
  } catch (...) {
    std::fputs("snowflakectl: out of memory\n", err);
    return kExitUnavailable;
  }
  size_t used = 0;
  auto flush = [&] {
    if (used > 0 && std::fwrite(text.data(), 1, used, out) != used) return false;
    used = 0;
    return true;
  };
  uint64_t left = count;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, kBatch));
    auto taken = client.NextBatch(std::span<uint64_t>(ids.data(), want));
    if (!taken) {
      flush();
      std::fflush(out);
      std::fprintf(err, "snowflakectl: %s\n", taken.error().message.c_str());
      return kExitUnavailable;
    }
    if (text.size() - used < *taken * kMaxLine && !flush()) {
      std::fputs("snowflakectl: cannot write the IDs to standard output\n", err);
      return kExitUnavailable;
    }
    for (size_t i = 0; i < *taken; ++i) {
      char* at = text.data() + used;
      const auto end = std::to_chars(at, at + kMaxLine, ids[i]).ptr;
      *end = '\n';
      used += static_cast<size_t>(end - at) + 1;
    }
    left -= *taken;
  }
  if (!flush() || std::fflush(out) != 0) {
    std::fputs("snowflakectl: cannot write the IDs to standard output\n", err);
    return kExitUnavailable;
  }
  return kExitOk;
}

void AddNextCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "next",
      "Take IDs from the local daemon and print them, one decimal per line, strictly "
      "increasing. Exit 1 if the daemon is not running or not serving.");
  auto count = std::make_shared<uint64_t>(1);
  auto service = std::make_shared<std::string>("snowflakectl");
  command->add_option("-n,--count", *count, "How many IDs (1 to 1000000000)")
      ->check(CLI::Range(uint64_t{1}, kMaxNextCount))
      ->capture_default_str();
  command
      ->add_option("--service", *service,
                   "The service name the IDs are counted under (1-63 chars of [a-z0-9._-])")
      ->capture_default_str();
  auto remotes = std::make_shared<std::vector<std::string>>();
  command
      ->add_option("--remote", *remotes,
                   "Another daemon's HTTP front (host:port) to take from while the local "
                   "daemon is not serving; repeat or separate with commas (default: "
                   "$SNOWFLAKE_REMOTES)")
      ->delimiter(',');
  auto runtime_dir = AddRuntimeDirOption(app, *command);
  command->callback([count, service, runtime_dir, remotes] {
    ClientOptions options;
    options.runtime_dir = runtime_dir();
    options.remotes = *remotes;
    // A person or script waits for the whole command, not for one ID: generous limits.
    options.remote_attempt_timeout = std::chrono::milliseconds(1000);
    options.remote_deadline = std::chrono::milliseconds(5000);
    auto client = Client::Open(*service, options);
    if (!client) {
      std::fprintf(stderr, "snowflakectl: %s\n", client.error().message.c_str());
      throw CLI::RuntimeError(
          client.error().code == ClientError::kInvalidServiceName ? kExitUsage : kExitUnavailable);
    }
    if (const int status = RunNext(*client, *count, stdout, stderr); status != kExitOk) {
      throw CLI::RuntimeError(status);
    }
  });
}

}  // namespace snowflake::cli
