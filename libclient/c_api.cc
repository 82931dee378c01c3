// The C ABI over snowflake::Client. Every entry point catches everything: no exception
// may unwind into a C caller.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "protocol/vocabulary.h"
#include "snowflake/client.h"
#include "snowflake/id_layout.h"
#include "snowflake/snowflake.h"
#include "snowflake/time_text.h"

struct sf_client {
  snowflake::Client client;
};

namespace {

using snowflake::ClientError;
namespace vocab = snowflake::vocab;

thread_local std::string last_error;

// The largest struct_size accepted: room for future fields, small enough that reading the
// caller's claimed bytes cannot run far past a real struct.
constexpr size_t kMaxOptionsSize = 256;

// sf_status numbers the library's conditions as the vocabulary's ErrorCode does (ABI
// values that never change), so a status is its vocabulary code and sf_status_str is the
// table's. Each value is pinned here, by name: a new status without its row, or a row
// renumbered on one side, does not compile.
constexpr std::pair<sf_status, vocab::ErrorCode> kStatusCodes[] = {
    {SF_INVALID_SERVICE_NAME, vocab::ErrorCode::kInvalidServiceName},
    {SF_INVALID_ARGUMENT, vocab::ErrorCode::kInvalidArgument},
    {SF_DAEMON_NOT_RUNNING, vocab::ErrorCode::kDaemonNotRunning},
    {SF_PERMISSION_DENIED, vocab::ErrorCode::kPermissionDenied},
    {SF_INCOMPATIBLE_VERSION, vocab::ErrorCode::kIncompatibleVersion},
    {SF_CORRUPT_SEGMENT, vocab::ErrorCode::kCorruptSegment},
    {SF_UNTRUSTED_SEGMENT, vocab::ErrorCode::kUntrustedSegment},
    {SF_DAEMON_STARTING, vocab::ErrorCode::kDaemonStarting},
    {SF_DAEMON_PAUSED, vocab::ErrorCode::kDaemonPaused},
    {SF_DAEMON_OUT_OF_SERVICE, vocab::ErrorCode::kDaemonOutOfService},
    {SF_DAEMON_STOPPED, vocab::ErrorCode::kDaemonStopped},
    {SF_DAEMON_NOT_HEARTBEATING, vocab::ErrorCode::kDaemonNotHeartbeating},
    {SF_DAEMON_DEAD, vocab::ErrorCode::kDaemonDead},
    {SF_TIMED_OUT, vocab::ErrorCode::kTimedOut},
    {SF_SYSTEM_ERROR, vocab::ErrorCode::kSystemError},
    {SF_TIME_OUT_OF_RANGE, vocab::ErrorCode::kTimeOutOfRange},
    {SF_RING_EMPTY, vocab::ErrorCode::kRingEmpty},
};
constexpr bool StatusesAreTheVocabularys() {
  for (const auto& [status, code] : kStatusCodes) {
    if (static_cast<int>(status) != static_cast<int>(code)) return false;
  }
  return true;
}
static_assert(StatusesAreTheVocabularys(),
              "an sf_status differs from its vocabulary code: both are ABI values that never "
              "change, so the one that moved is wrong");
static_assert(std::size(kStatusCodes) == static_cast<size_t>(vocab::kLastLibraryError),
              "every library code of the vocabulary has its sf_status here");
static_assert(SF_RING_EMPTY == static_cast<int>(vocab::kLastLibraryError),
              "every sf_status has its row in the vocabulary");

// ClientError is one below sf_status (and ClientErrorName checks each value against the
// vocabulary the same way); SF_TIME_OUT_OF_RANGE, sf_bounds' own, has no ClientError.
sf_status ToStatus(ClientError code) noexcept {
  return static_cast<sf_status>(static_cast<int>(code) + 1);
}
static_assert(SF_INVALID_SERVICE_NAME == static_cast<int>(ClientError::kInvalidServiceName) + 1 &&
                  SF_SYSTEM_ERROR == static_cast<int>(ClientError::kSystemError) + 1 &&
                  SF_RING_EMPTY == static_cast<int>(ClientError::kRingEmpty) + 1,
              "ToStatus adds one: ClientError's codes must be one below theirs");

// The failover rule is the vocabulary's action column: AnotherDaemonMayServe (a constexpr
// of the public header, which cannot include protocol/) must say "fail over" for exactly
// the codes whose action is kFailOver, and sf_action's values are the column's.
constexpr bool FailoverIsTheVocabularys() {
  for (int s = static_cast<int>(vocab::kFirstLibraryError);
       s <= static_cast<int>(vocab::kLastLibraryError); ++s) {
    if (s == SF_TIME_OUT_OF_RANGE) continue;  // no ClientError
    const bool fails_over = vocab::kErrors[s - 1].action == vocab::ErrorAction::kFailOver;
    if (AnotherDaemonMayServe(static_cast<ClientError>(s - 1)) != fails_over) return false;
  }
  return true;
}
static_assert(FailoverIsTheVocabularys(),
              "AnotherDaemonMayServe disagrees with the vocabulary's action column");
static_assert(SF_ACTION_FAIL_OVER == static_cast<int>(vocab::ErrorAction::kFailOver) &&
                  SF_ACTION_RETRY_HERE == static_cast<int>(vocab::ErrorAction::kRetryHere) &&
                  SF_ACTION_FIX_THE_CALL == static_cast<int>(vocab::ErrorAction::kFixTheCall) &&
                  SF_ACTION_FIX_THE_HOST == static_cast<int>(vocab::ErrorAction::kFixTheHost),
              "sf_action casts the vocabulary's ErrorAction: the values must be the same ABI "
              "numbers");
static_assert(SF_ACTION_FIX_THE_HOST == vocab::kActions.size(), "every action has its sf_action");

// Records the message for sf_last_error; an allocation failure leaves it empty.
sf_status Fail(sf_status status, const char* message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    last_error.clear();
  }
  return status;
}

sf_status Fail(const snowflake::Error& error) noexcept {
  return Fail(ToStatus(error.code), error.message.c_str());
}

// Copies the caller's sf_options into `given` (which holds the defaults), reading only the
// fields the caller's header knew about, as struct_size says. struct_size must end at a
// field boundary (a size inside a field means a corrupt or uninitialised struct, and a
// half-copied pointer would be dereferenced later); every reserved field the caller
// passes, and any tail beyond this library's struct (a newer header), must be zero.
sf_status ReadOptions(const sf_options& opts, sf_options& given) {
  const size_t size = opts.struct_size;
  static constexpr size_t kBoundaries[] = {
      offsetof(sf_options, runtime_dir),           // struct_size, wait_timeout_ms
      offsetof(sf_options, max_heartbeat_age_ms),  // + runtime_dir
      offsetof(sf_options, reserved),              // + max_heartbeat_age_ms
      offsetof(sf_options, remotes),               // + reserved (0.1's struct)
      offsetof(sf_options, remotes_ca),            // + remotes (0.2's struct)
      offsetof(sf_options, remotes_cert),          // + remotes_ca
      offsetof(sf_options, remotes_key),           // + remotes_cert
      sizeof(sf_options),                          // + remotes_key
  };
  const bool at_boundary =
      std::find(std::begin(kBoundaries), std::end(kBoundaries), size) != std::end(kBoundaries);
  if (size < kBoundaries[0]) {
    return Fail(SF_INVALID_ARGUMENT, ("sf_open: sf_options.struct_size " + std::to_string(size) +
                                      " is too small; initialise it with sf_options_init")
                                         .c_str());
  }
  if (size <= sizeof(sf_options) && !at_boundary) {
    return Fail(SF_INVALID_ARGUMENT,
                ("sf_open: sf_options.struct_size " + std::to_string(size) +
                 " ends inside a field; initialise it with sf_options_init")
                    .c_str());
  }
  if (size > kMaxOptionsSize) {
    return Fail(SF_INVALID_ARGUMENT, ("sf_open: sf_options.struct_size " + std::to_string(size) +
                                      " is implausibly large; initialise it with sf_options_init")
                                         .c_str());
  }
  // A newer header's extra fields: usable by this library only if all are zero (unset).
  const auto* bytes = reinterpret_cast<const unsigned char*>(&opts);
  for (size_t at = sizeof(sf_options); at < size; ++at) {
    if (bytes[at] != 0) {
      return Fail(SF_INVALID_ARGUMENT,
                  "sf_open: sf_options has fields this library does not know set (a newer "
                  "header?); link the matching libsnowflake or leave them zero");
    }
  }
  std::memcpy(&given, &opts, std::min(size, sizeof(sf_options)));
  if (size >= offsetof(sf_options, remotes) && given.reserved != 0) {
    return Fail(SF_INVALID_ARGUMENT, "sf_open: sf_options.reserved must be 0");
  }
  return SF_OK;
}

// The IdLayout of `bits` and `epoch_unix_ms` for the C function `fn`, or the failure it
// returns: SF_INVALID_ARGUMENT saying what is wrong with either.
tl::expected<snowflake::IdLayout, sf_status> LayoutOf(const char* fn, const sf_id_bits& bits,
                                                      int64_t epoch_unix_ms) noexcept {
  const snowflake::IdBits id_bits{bits.time, bits.machine, bits.sequence};
  auto layout = snowflake::IdLayout::Create(epoch_unix_ms, id_bits);
  if (layout) return *layout;
  try {
    if (layout.error() == snowflake::IdError::kBitsInvalid) {
      // The epoch only dates the message's "until" years; a bad one must not hide the bits.
      const int64_t dated = epoch_unix_ms >= 0 ? epoch_unix_ms : snowflake::kDefaultEpochUnixMs;
      return tl::unexpected(
          Fail(SF_INVALID_ARGUMENT,
               (std::string(fn) + ": sf_id_bits " + std::to_string(bits.time) + "/" +
                std::to_string(bits.machine) + "/" + std::to_string(bits.sequence) +
                " is not a layout: " + snowflake::IdBitsProblem(id_bits, dated))
                   .c_str()));
    }
    return tl::unexpected(
        Fail(SF_INVALID_ARGUMENT,
             (std::string(fn) + ": epoch out of range: " + std::to_string(epoch_unix_ms) +
              " is not a non-negative Unix time in milliseconds of at most 2^63-2^" +
              std::to_string(bits.time) + " (the layout's " + std::to_string(bits.time) +
              " time bits must fit after it)")
                 .c_str()));
  } catch (...) {
    return tl::unexpected(Fail(SF_INVALID_ARGUMENT, "not a layout or epoch out of range"));
  }
}

// Decodes for sf_decode and sf_decode_in (`fn`, for messages).
sf_status DecodeIn(const char* fn, const snowflake::IdLayout& layout, uint64_t id,
                   sf_decoded_id* out) noexcept {
  auto decoded = layout.Decode(id);
  if (!decoded) {
    try {
      return Fail(SF_INVALID_ARGUMENT, (std::string(fn) + ": " + std::to_string(id) + ": " +
                                        std::string(snowflake::IdErrorMessage(decoded.error())))
                                           .c_str());
    } catch (...) {
      return Fail(SF_INVALID_ARGUMENT, "no ID");
    }
  }
  *out = sf_decoded_id{decoded->unix_ms, decoded->machine, decoded->sequence};
  return SF_OK;
}

// Bounds for sf_bounds and sf_bounds_in (`fn`, for messages).
sf_status BoundsIn(const char* fn, const snowflake::IdLayout& layout, int64_t from_unix_ms,
                   int64_t to_unix_ms, sf_id_bounds* out) noexcept {
  const auto bounds = layout.Bounds(from_unix_ms, to_unix_ms);
  if (!bounds) {
    const sf_status status = bounds.error() == snowflake::IdError::kRangeReversed
                                 ? SF_INVALID_ARGUMENT
                                 : SF_TIME_OUT_OF_RANGE;
    try {
      return Fail(status,
                  (std::string(fn) + ": " + std::string(snowflake::IdErrorMessage(bounds.error())))
                      .c_str());
    } catch (...) {
      return Fail(status, "no IDs for this range");
    }
  }
  *out =
      sf_id_bounds{bounds->first_id, bounds->last_id, bounds->first_unix_ms, bounds->last_unix_ms};
  return SF_OK;
}

}  // namespace

extern "C" {

void sf_options_init(sf_options* opts) {
  if (opts == nullptr) return;
  *opts = sf_options SF_OPTIONS_INIT;
}

sf_status sf_open(const char* service, const sf_options* opts, sf_client** out) {
  if (out == nullptr) return Fail(SF_INVALID_ARGUMENT, "sf_open: out is NULL");
  *out = nullptr;
  if (service == nullptr) return Fail(SF_INVALID_SERVICE_NAME, "sf_open: service is NULL");
  try {
    snowflake::ClientOptions options;
    if (opts != nullptr) {
      sf_options given = sf_options SF_OPTIONS_INIT;
      if (auto read = ReadOptions(*opts, given); read != SF_OK) return read;
      options.wait_timeout = std::chrono::milliseconds(given.wait_timeout_ms);
      if (given.runtime_dir != nullptr) options.runtime_dir = given.runtime_dir;
      if (given.max_heartbeat_age_ms != 0) {
        options.max_heartbeat_age = std::chrono::milliseconds(given.max_heartbeat_age_ms);
      }
      if (given.remotes != nullptr) {
        // Given, even "": these remotes and no others ($SNOWFLAKE_REMOTES is not read).
        options.remotes_from_environment = false;
        std::string_view rest(given.remotes);
        while (!rest.empty()) {
          const size_t comma = rest.find(',');
          if (comma != 0) options.remotes.emplace_back(rest.substr(0, comma));
          rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        }
      }
      if (given.remotes_ca != nullptr) options.remotes_ca_file = given.remotes_ca;
      if (given.remotes_cert != nullptr) options.remotes_cert_file = given.remotes_cert;
      if (given.remotes_key != nullptr) options.remotes_key_file = given.remotes_key;
    }
    auto maybe_client = snowflake::Client::Open(service, options);
    if (!maybe_client) return Fail(maybe_client.error());
    *out = new sf_client{std::move(*maybe_client)};
    return SF_OK;
  } catch (const std::exception& e) {
    return Fail(SF_SYSTEM_ERROR, e.what());
  } catch (...) {
    return Fail(SF_SYSTEM_ERROR, "sf_open: unknown error");
  }
}

sf_status sf_next(sf_client* c, uint64_t* id) {
  if (c == nullptr || id == nullptr) return Fail(SF_INVALID_ARGUMENT, "sf_next: NULL argument");
  auto taken = c->client.Next();
  if (!taken) return Fail(taken.error());
  *id = *taken;
  return SF_OK;
}

sf_status sf_next_batch(sf_client* c, uint64_t* ids, size_t n, size_t* got) {
  if (got != nullptr) *got = 0;
  if (c == nullptr || ids == nullptr || got == nullptr) {
    return Fail(SF_INVALID_ARGUMENT, "sf_next_batch: NULL argument");
  }
  if (n == 0) return Fail(SF_INVALID_ARGUMENT, "sf_next_batch: n is 0");
  auto taken = c->client.NextBatch(std::span<uint64_t>(ids, n));
  if (!taken) return Fail(taken.error());
  *got = *taken;
  return SF_OK;
}

void sf_close(sf_client* c) { delete c; }

sf_status sf_decode(const sf_client* c, uint64_t id, sf_decoded_id* out) {
  if (out == nullptr) return Fail(SF_INVALID_ARGUMENT, "sf_decode: out is NULL");
  const snowflake::IdLayout layout = c != nullptr ? c->client.layout() : snowflake::IdLayout();
  return DecodeIn("sf_decode", layout, id, out);
}

sf_status sf_decode_in(const sf_id_bits* bits, int64_t epoch_unix_ms, uint64_t id,
                       sf_decoded_id* out) {
  if (bits == nullptr || out == nullptr) {
    return Fail(SF_INVALID_ARGUMENT, "sf_decode_in: NULL argument: bits and out are required");
  }
  const auto layout = LayoutOf("sf_decode_in", *bits, epoch_unix_ms);
  if (!layout) return layout.error();
  return DecodeIn("sf_decode_in", *layout, id, out);
}

sf_status sf_parse_time(const char* text, int64_t* unix_ms) {
  if (text == nullptr || unix_ms == nullptr) {
    return Fail(SF_INVALID_ARGUMENT, "sf_parse_time: NULL argument");
  }
  auto parsed = snowflake::ParseTimeText(text);
  if (!parsed) {
    try {
      return Fail(SF_INVALID_ARGUMENT,
                  ("sf_parse_time: bad time '" + std::string(text) + "': " + parsed.error() +
                   "; expected " + std::string(snowflake::kTimeTextForms))
                      .c_str());
    } catch (...) {
      return Fail(SF_INVALID_ARGUMENT, "sf_parse_time: bad time");
    }
  }
  *unix_ms = *parsed;
  return SF_OK;
}

sf_status sf_bounds(int64_t epoch_unix_ms, int64_t from_unix_ms, int64_t to_unix_ms,
                    sf_id_bounds* out) {
  if (out == nullptr) return Fail(SF_INVALID_ARGUMENT, "sf_bounds: out is NULL");
  const auto layout = snowflake::IdLayout::Create(epoch_unix_ms);
  if (!layout) {
    return Fail(SF_INVALID_ARGUMENT,
                "sf_bounds: epoch out of range: it must be a non-negative Unix time in "
                "milliseconds, at most 2^63-2^41");
  }
  return BoundsIn("sf_bounds", *layout, from_unix_ms, to_unix_ms, out);
}

sf_status sf_bounds_in(const sf_id_bits* bits, int64_t epoch_unix_ms, int64_t from_unix_ms,
                       int64_t to_unix_ms, sf_id_bounds* out) {
  if (bits == nullptr || out == nullptr) {
    return Fail(SF_INVALID_ARGUMENT, "sf_bounds_in: NULL argument: bits and out are required");
  }
  const auto layout = LayoutOf("sf_bounds_in", *bits, epoch_unix_ms);
  if (!layout) return layout.error();
  return BoundsIn("sf_bounds_in", *layout, from_unix_ms, to_unix_ms, out);
}

sf_status sf_parse_layout(const char* text, sf_id_bits* out) {
  if (text == nullptr || out == nullptr) {
    return Fail(SF_INVALID_ARGUMENT, "sf_parse_layout: NULL argument: text and out are required");
  }
  try {
    auto parsed = snowflake::ParseIdBits(text, snowflake::kDefaultEpochUnixMs);
    if (!parsed) return Fail(SF_INVALID_ARGUMENT, ("sf_parse_layout: " + parsed.error()).c_str());
    *out = sf_id_bits{parsed->time, parsed->machine, parsed->sequence};
    return SF_OK;
  } catch (...) {
    return Fail(SF_SYSTEM_ERROR, "sf_parse_layout: out of memory");
  }
}

const char* sf_status_str(sf_status s) {
  if (s == SF_OK) return "ok";
  const int value = static_cast<int>(s);
  if (value < static_cast<int>(vocab::kFirstLibraryError) ||
      value > static_cast<int>(vocab::kLastLibraryError)) {
    return "unknown_status";
  }
  // The table's codes are string literals: NUL-terminated, static storage.
  return vocab::ErrorName(static_cast<vocab::ErrorCode>(value)).data();
}

sf_action sf_status_action(sf_status s) {
  if (s == SF_OK) return SF_ACTION_NONE;
  const int value = static_cast<int>(s);
  if (value < static_cast<int>(vocab::kFirstLibraryError) ||
      value > static_cast<int>(vocab::kLastLibraryError)) {
    return SF_ACTION_FIX_THE_HOST;
  }
  return static_cast<sf_action>(vocab::ActionOf(static_cast<vocab::ErrorCode>(value)));
}

const char* sf_action_str(sf_action a) {
  if (a == SF_ACTION_NONE) return "none";
  // The table's codes are string literals: NUL-terminated, static storage.
  return vocab::ActionCode(static_cast<vocab::ErrorAction>(a)).data();
}

const char* sf_last_error(void) { return last_error.c_str(); }

}  // extern "C"
