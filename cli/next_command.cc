#include "next_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "command_error.h"
#include "exit_codes.h"
#include "protocol/vocabulary.h"
#include "runtime_dir_option.h"

namespace snowflake::cli {
namespace {

constexpr size_t kBatch = 8192;
// 20 digits + newline per ID at most; flushed when less than a batch's worth is left.
constexpr size_t kOutputBytes = 1 << 20;
constexpr size_t kMaxLine = 21;

}  // namespace

tl::expected<uint64_t, std::string> ParseCount(std::string_view text) noexcept {
  try {
    const std::string expected =
        "; expected a decimal whole number from 1 to " + std::to_string(kMaxNextCount);
    auto bad = [&](std::string_view why) {
      return tl::unexpected("bad count '" + std::string(text) + "': " + std::string(why) +
                            expected);
    };
    if (text.empty()) return bad("it is empty");
    const bool all_digits =
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (text.front() == '-' && text.size() > 1) return bad("it is negative");
    if (!all_digits) {
      return bad("not a decimal number (digits 0-9 only: no sign, prefix, fraction or exponent)");
    }
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range || value > kMaxNextCount) {
      return bad("too large: at most " + std::to_string(kMaxNextCount) + " IDs per command");
    }
    if (value == 0) return bad("zero IDs is nothing to do");
    return value;
  } catch (...) {
    return tl::unexpected(std::string("out of memory"));
  }
}

int RunNext(Client& client, uint64_t count, std::FILE* out, std::FILE* err,
            std::chrono::milliseconds ring_empty_patience) noexcept {
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
  // Since when the takes have found the ring empty, if the last one did, and how many did.
  std::optional<std::chrono::steady_clock::time_point> empty_since;
  uint64_t empty_takes = 0;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, kBatch));
    auto taken = client.NextBatch(std::span<uint64_t>(ids.data(), want));
    if (!taken) {
      // The vocabulary's action says what to do: retry_here (ring_empty) is retried, each
      // take having waited its own wait_timeout; anything else fails the command.
      const auto code = vocab::ErrorFromName(ClientErrorName(taken.error().code));
      const bool retry_here = code && vocab::ActionOf(*code) == vocab::ErrorAction::kRetryHere;
      const auto now = std::chrono::steady_clock::now();
      if (retry_here && !empty_since) empty_since = now;
      if (retry_here) ++empty_takes;
      if (retry_here && now - *empty_since < ring_empty_patience) continue;
      flush();
      std::fflush(out);
      if (retry_here) {
        std::fprintf(
            err, "snowflakectl: %s (%llu takes in a row found it empty, for %lld ms)\n",
            taken.error().message.c_str(), static_cast<unsigned long long>(empty_takes),
            static_cast<long long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(now - *empty_since).count()));
      } else {
        std::fprintf(err, "snowflakectl: %s\n", taken.error().message.c_str());
      }
      return kExitUnavailable;
    }
    empty_since.reset();
    empty_takes = 0;
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
  auto count_text = std::make_shared<std::string>("1");
  auto service = std::make_shared<std::string>("snowflakectl");
  command->add_option("-n,--count", *count_text, "How many IDs, in decimal (1 to 1000000000)")
      ->type_name("N")
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
  command->callback([count_text, service, runtime_dir, remotes] {
    const auto count = ParseCount(*count_text);
    if (!count)
      FailCommand({kExitUsage, CodeName(vocab::ErrorCode::kUsage), "next: " + count.error()},
                  false);
    if (auto valid = ValidateServiceName(*service); !valid) {
      FailCommand({kExitUsage, CodeName(vocab::ErrorCode::kUsage),
                   "next: --service: " + valid.error().message},
                  false);
    }
    const RuntimeDir dir = runtime_dir();
    if (auto unusable = CheckRuntimeDir(dir)) {
      // A host without snowflaked (no runtime directory at all) is where remotes are
      // needed most: the Client takes from them. Any other problem stays an error.
      const char* env_remotes = std::getenv("SNOWFLAKE_REMOTES");
      const bool has_remotes =
          !remotes->empty() || (env_remotes != nullptr && *env_remotes != '\0');
      if (!has_remotes || unusable->code != CodeName(vocab::ErrorCode::kDaemonNotRunning))
        FailCommand(*unusable, false);
    }
    ClientOptions options;
    options.runtime_dir = dir.path;
    options.remotes = *remotes;
    // A person or script waits for the whole command, not for one ID: generous limits.
    options.remote_attempt_timeout = std::chrono::milliseconds(1000);
    options.remote_deadline = std::chrono::milliseconds(5000);
    auto client = Client::Open(*service, options);
    if (!client) {
      FailCommand(
          {client.error().code == ClientError::kInvalidServiceName ? kExitUsage : kExitUnavailable,
           std::string(ClientErrorName(client.error().code)), client.error().message},
          false);
    }
    if (const int status = RunNext(*client, *count, stdout, stderr); status != kExitOk) {
      throw CLI::RuntimeError(status);
    }
  });
}

}  // namespace snowflake::cli
