#include "remote_pool.h"

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "protocol/id_reply.h"
#include "snowflake/id_layout.h"

namespace snowflake::detail {
namespace {

using Steady = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kBreakerBase{50};
constexpr std::chrono::milliseconds kBreakerMax{2000};
// A remote's Retry-After is obeyed up to this: a longer one is a remote to skip for a
// minute, not one to forget.
constexpr std::chrono::milliseconds kMaxRetryAfter{60'000};
constexpr size_t kMaxRemoteBatch = 4096;
// A remote answer entirely at or below our last ID (another host's same millisecond):
// wait for the next millisecond and ask again, this many times at most.
constexpr int kStaleRetries = 2;
// A local ring whose IDs are at most this far below the last ID a remote gave us is
// waited for (see Take): polled this often, one ID at a time, for the gap and 2 ms more.
constexpr int64_t kCatchUpMs = 10;
constexpr std::chrono::microseconds kCatchUpPoll{100};

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  // A reply to 4096 IDs is under 100 KB; anything far larger is not our front.
  if (body->size() + size * count > 1 << 20) return 0;
  body->append(data, size * count);
  return size * count;
}

// "https://host:port" -> true and "host:port"; "http://host:port" and "host:port" ->
// false and "host:port"; nullopt for any other scheme or an empty address.
std::optional<std::pair<bool, std::string_view>> SplitRemote(std::string_view remote) {
  bool tls = false;
  if (remote.starts_with("https://")) {
    tls = true;
    remote.remove_prefix(8);
  } else if (remote.starts_with("http://")) {
    remote.remove_prefix(7);
  } else if (remote.find("://") != std::string_view::npos) {
    return std::nullopt;
  }
  while (!remote.empty() && remote.back() == '/') remote.remove_suffix(1);
  if (remote.empty() || remote.find_first_of("/?#@ ") != std::string_view::npos) {
    return std::nullopt;
  }
  return std::make_pair(tls, remote);
}

// The option if set, else the environment variable if set, else "".
std::string OptionOrEnvironment(const std::filesystem::path& option, const char* variable) {
  if (!option.empty()) return option.string();
  const char* value = std::getenv(variable);
  return value != nullptr ? std::string(value) : std::string();
}

}  // namespace

namespace {

// The answer's Retry-After in delay-seconds (RFC 9110; the front sends no HTTP-date), or 0
// if there is none or it is not a number.
std::chrono::milliseconds RetryAfterOf(CURL* handle) {
  curl_header* header = nullptr;
  if (curl_easy_header(handle, "Retry-After", 0, CURLH_HEADER, -1, &header) != CURLHE_OK ||
      header == nullptr || header->value == nullptr) {
    return std::chrono::milliseconds{0};
  }
  const std::string_view text = header->value;
  int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || seconds <= 0) {
    return std::chrono::milliseconds{0};
  }
  return std::chrono::milliseconds{std::min<int64_t>(seconds, 86'400) * 1000};
}

}  // namespace

struct RemotePool::Endpoint {
  std::string address;              // as given: "host:port", "https://host:port"
  bool tls = false;                 // https://: TLS only, never plain HTTP
  std::string url_prefix;           // "http(s)://host:port/v1/ids?service=S&count="
  std::vector<CURL*> idle;          // reusable handles (keep-alive), guarded by mutex_
  int failures = 0;                 // consecutive, guarded by mutex_
  Steady::time_point open_until{};  // breaker: skip until then, guarded by mutex_
  std::string last_error;           // guarded by mutex_

  ~Endpoint() {
    for (CURL* handle : idle) curl_easy_cleanup(handle);
  }
};

tl::expected<RemotePool::TlsFiles, Error> RemotePool::Check(const std::vector<std::string>& remotes,
                                                            const ClientOptions& options) {
  for (const std::string& remote : remotes) {
    if (!SplitRemote(remote)) {
      return tl::unexpected(
          Error{ClientError::kInvalidArgument, "remote \"" + remote +
                                                   "\": expected host:port, http://host:port or "
                                                   "https://host:port"});
    }
  }
  TlsFiles files{OptionOrEnvironment(options.remotes_ca_file, "SNOWFLAKE_REMOTES_CA"),
                 OptionOrEnvironment(options.remotes_cert_file, "SNOWFLAKE_REMOTES_CERT"),
                 OptionOrEnvironment(options.remotes_key_file, "SNOWFLAKE_REMOTES_KEY")};
  // TLS files beside a plain remote would be ignored for it: its answers would come
  // unauthenticated while the caller believes it set up TLS.
  if (!files.ca.empty() || !files.cert.empty()) {
    for (const std::string& remote : remotes) {
      if (!SplitRemote(remote)->first) {
        return tl::unexpected(Error{
            ClientError::kInvalidArgument,
            "remote \"" + remote +
                "\" is plain HTTP, but a TLS CA file or client certificate for the remotes is "
                "set (remotes_ca_file/remotes_cert_file, or $SNOWFLAKE_REMOTES_CA/"
                "$SNOWFLAKE_REMOTES_CERT): write it as https://" +
                std::string(SplitRemote(remote)->second) + ", or unset the TLS files"});
      }
    }
  }
  if (files.cert.empty() != files.key.empty()) {
    return tl::unexpected(
        Error{ClientError::kInvalidArgument,
              "a client certificate for https:// remotes needs its key, and a key its certificate "
              "(remotes_cert_file and remotes_key_file, or $SNOWFLAKE_REMOTES_CERT and "
              "$SNOWFLAKE_REMOTES_KEY: both or neither)"});
  }
  for (const auto& [what, file] :
       {std::pair{"CA file", &files.ca}, std::pair{"client certificate", &files.cert},
        std::pair{"client key", &files.key}}) {
    if (file->empty()) continue;
    FILE* f = std::fopen(file->c_str(), "rb");
    if (f == nullptr) {
      return tl::unexpected(Error{ClientError::kInvalidArgument,
                                  std::string("the remotes' TLS ") + what + " " + *file +
                                      " cannot be read: " + std::strerror(errno)});
    }
    std::fclose(f);
  }
  return files;
}

RemotePool::RemotePool(std::string service, std::vector<std::string> remotes,
                       const ClientOptions& options, TlsFiles tls, IdLayout layout)
    : service_(std::move(service)),
      attempt_timeout_(options.remote_attempt_timeout),
      deadline_(options.remote_deadline),
      max_age_(options.remote_max_age),
      max_ahead_(options.remote_max_ahead),
      layout_(layout),
      tls_(std::move(tls)),
      clock_(options.clock != nullptr ? *options.clock : Clock::Real()),
      // A seed, not a time: the real clock, so that pools on a test's clock still differ.
      jitter_(static_cast<unsigned>(Clock::Real().SteadyNow().time_since_epoch().count())) {
  static std::once_flag curl_ready;
  std::call_once(curl_ready, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  for (std::string& address : remotes) {
    auto endpoint = std::make_unique<Endpoint>();
    // Check() refused any other form.
    const auto [tls, host_port] = SplitRemote(address).value();
    endpoint->tls = tls;
    endpoint->url_prefix = (tls ? "https://" : "http://") + std::string(host_port) +
                           "/v1/ids?service=" + service_ + "&count=";
    endpoint->address = std::move(address);
    endpoints_.push_back(std::move(endpoint));
  }
}

RemotePool::~RemotePool() = default;

std::vector<std::string> RemotePool::FromEnvironment() {
  std::vector<std::string> out;
  const char* text = std::getenv("SNOWFLAKE_REMOTES");
  if (text == nullptr) return out;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

size_t RemotePool::Admit(uint64_t* out, size_t n) noexcept {
  uint64_t last = last_.load(std::memory_order_acquire);
  for (;;) {
    // Case 1: everything is at or below the last returned ID: nothing to return.
    // Case 2: a prefix is: drop it (IDs wasted, never reissued).
    // Case 3: raise last_ to our largest; a failed CAS means another thread returned a
    //         larger ID meanwhile: re-filter against it.
    size_t skip = 0;
    while (skip < n && out[skip] <= last) ++skip;
    if (skip == n) return 0;
    if (last_.compare_exchange_weak(last, out[n - 1], std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      if (skip > 0) std::copy(out + skip, out + n, out);
      return n - skip;
    }
  }
}

tl::expected<size_t, Error> RemotePool::Take(std::span<uint64_t> out,
                                             const LocalTake& local) noexcept {
  try {
    std::optional<Steady::time_point> catch_up_until;
    for (int attempt = 0;; ++attempt) {
      // While catching up, one ID at a time: the rest of a batch would only be wasted.
      auto taken = local(catch_up_until ? out.first(1) : out);
      if (!taken) {
        if (!AnotherDaemonMayServe(taken.error().code) || endpoints_.empty()) return taken;
        return TakeRemote(out, taken.error());
      }
      if (const size_t n = Admit(out.data(), *taken); n > 0) return n;
      // The ring's IDs are at or below one a remote gave us: the remote's millisecond or
      // one just before it right after a failover, or a local clock a little behind the
      // remote's. The ring passes the gap in that many milliseconds: wait for it there,
      // once. Asking a remote instead puts the last ID at the remote's clock again, so
      // the client stays on the remotes for as long as each answer lands ahead of the
      // ring (seen for 15 s under load with clocks in step; for ever with the local
      // clock a few ms behind).
      const int64_t behind_ms = *taken == 0
                                    ? -1
                                    : layout_.OffsetMsOf(last_.load(std::memory_order_acquire)) -
                                          layout_.OffsetMsOf(out[*taken - 1]);
      if (behind_ms >= 0 && behind_ms <= kCatchUpMs) {
        const auto now = clock_.SteadyNow();
        if (!catch_up_until) catch_up_until = now + std::chrono::milliseconds(behind_ms + 2);
        if (now < *catch_up_until) {
          clock_.SleepFor(kCatchUpPoll);
          continue;
        }
      }
      // Further behind (or not caught up in time): a local clock well behind the remote's.
      // A few retakes, then keep to the remotes (each take still tries the ring first,
      // and returns to it once its IDs are above).
      if (attempt >= kStaleRetries) {
        if (endpoints_.empty()) break;
        return TakeRemote(out, Error{ClientError::kTimedOut,
                                     "the local daemon's IDs are at or below the last one "
                                     "returned from a remote (its clock is behind)"});
      }
    }
    return tl::unexpected(Error{ClientError::kTimedOut,
                                "the local ring kept handing out IDs at or below one already "
                                "returned; retry"});
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ClientError::kSystemError, std::string("failover: ") + e.what()});
  }
}

tl::expected<size_t, Error> RemotePool::TakeRemote(std::span<uint64_t> out,
                                                   const Error& local_error) {
  const auto deadline = clock_.SteadyNow() + deadline_;
  std::vector<Endpoint*> order;
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      order.push_back(endpoints_[(preferred_ + i) % endpoints_.size()].get());
    }
  }
  std::string tried;
  auto note = [&tried](const Endpoint& e, const std::string& why) {
    tried += (tried.empty() ? "" : "; ") + e.address + ": " + why;
  };
  for (Endpoint* endpoint : order) {
    {
      std::lock_guard lock(mutex_);
      const auto now = clock_.SteadyNow();
      if (now < endpoint->open_until) {
        note(*endpoint, "skipped for " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               endpoint->open_until - now)
                                               .count()) +
                            " ms more after: " + endpoint->last_error);
        continue;
      }
    }
    for (int round = 0; round <= kStaleRetries; ++round) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_.SteadyNow());
      if (left.count() <= 0) {
        note(*endpoint, "not tried: the overall deadline of " + std::to_string(deadline_.count()) +
                            " ms passed");
        break;
      }
      std::chrono::milliseconds retry_after{0};
      auto fetched = Fetch(*endpoint, out, std::min(attempt_timeout_, left), &retry_after);
      std::lock_guard lock(mutex_);
      if (!fetched) {
        endpoint->failures += 1;
        endpoint->last_error = fetched.error();
        const auto backoff = std::min<std::chrono::milliseconds>(
            kBreakerMax, kBreakerBase * (1 << std::min(endpoint->failures - 1, 6)));
        const double factor = std::uniform_real_distribution<double>(0.5, 1.5)(jitter_);
        // A remote that says when to come back (429 and 503 carry Retry-After) is skipped
        // until then, at least: asking sooner only adds to its load.
        endpoint->open_until =
            clock_.SteadyNow() +
            std::max(std::chrono::duration_cast<Steady::duration>(backoff * factor),
                     std::chrono::duration_cast<Steady::duration>(
                         std::min(retry_after, kMaxRetryAfter)));
        note(*endpoint, fetched.error());
        break;
      }
      endpoint->failures = 0;
      preferred_ =
          static_cast<size_t>(std::find_if(endpoints_.begin(), endpoints_.end(),
                                           [&](const auto& e) { return e.get() == endpoint; }) -
                              endpoints_.begin());
      if (const size_t n = Admit(out.data(), *fetched); n > 0) return n;
      // Another host's IDs of a millisecond we already passed: wait for the next one.
      if (round == kStaleRetries) {
        note(*endpoint, "its IDs stayed at or below the last one returned (its clock is behind)");
      } else {
        clock_.SleepFor(std::chrono::milliseconds(1));
      }
    }
  }
  return tl::unexpected(Error{local_error.code, "no ID: the local daemon is not serving (" +
                                                    local_error.message +
                                                    "), and no remote gave one: " + tried});
}

struct RemotePool::Request {
  char accept[19] = "Accept: text/plain";
  curl_slist accept_header{};
  char error[CURL_ERROR_SIZE] = "";
  std::string body;
};

void* RemotePool::IdleHandle(Endpoint& endpoint) {
  {
    std::lock_guard lock(mutex_);
    if (!endpoint.idle.empty()) {
      CURL* handle = endpoint.idle.back();
      endpoint.idle.pop_back();
      return handle;
    }
  }
  return curl_easy_init();
}

void RemotePool::SetRequest(void* curl, const Endpoint& endpoint, const std::string& url,
                            std::chrono::milliseconds timeout, Request& request) const {
  CURL* handle = curl;
  request.accept_header.data = request.accept;
  request.accept_header.next = nullptr;
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, &request.accept_header);
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, timeout.count())));
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, timeout.count())));
  curl_easy_setopt(handle, CURLOPT_TCP_NODELAY, 1L);
  // An https:// remote is asked over TLS only, verified (peer and host name) against the
  // CA file: a failed verification fails the attempt, never falls back to plain HTTP.
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, request.error);
  curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, endpoint.tls ? "https" : "http");
  if (endpoint.tls) {
    curl_easy_setopt(handle, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    curl_easy_setopt(handle, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(handle, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!tls_.ca.empty()) curl_easy_setopt(handle, CURLOPT_CAINFO, tls_.ca.c_str());
    if (!tls_.cert.empty()) {
      curl_easy_setopt(handle, CURLOPT_SSLCERT, tls_.cert.c_str());
      curl_easy_setopt(handle, CURLOPT_SSLKEY, tls_.key.c_str());
    }
  }
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &request.body);
}

tl::expected<size_t, std::string> RemotePool::Fetch(Endpoint& endpoint, std::span<uint64_t> out,
                                                    std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds* retry_after) {
  *retry_after = std::chrono::milliseconds{0};
  CURL* handle = static_cast<CURL*>(IdleHandle(endpoint));
  if (handle == nullptr) return tl::unexpected(std::string("cannot create a curl handle"));
  const size_t want = std::min(out.size(), kMaxRemoteBatch);
  Request request;
  SetRequest(handle, endpoint, endpoint.url_prefix + std::to_string(want), timeout, request);
  const CURLcode rc = curl_easy_perform(handle);
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, nullptr);
  if (rc != CURLE_OK) {
    // The connection may be half-used: do not reuse this handle.
    curl_easy_cleanup(handle);
    // curl's own detail ("SSL certificate problem: unable to get local issuer
    // certificate") says why a TLS remote was refused.
    const std::string detail = request.error[0] != '\0' ? std::string(": ") + request.error : "";
    return tl::unexpected(std::string(curl_easy_strerror(rc)) + detail +
                          (rc == CURLE_OPERATION_TIMEDOUT
                               ? " (" + std::to_string(timeout.count()) + " ms)"
                               : std::string()));
  }
  {
    std::lock_guard lock(mutex_);
    endpoint.idle.push_back(handle);
  }
  if (status != 200) {
    *retry_after = RetryAfterOf(handle);
    const std::string code = protocol::ErrorCodeOf(request.body);
    return tl::unexpected(
        "HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code) +
        (retry_after->count() > 0
             ? " (Retry-After " + std::to_string(retry_after->count() / 1000) + " s)"
             : std::string()));
  }
  return ReadIds(request.body, want, out);
}

tl::expected<size_t, std::string> RemotePool::ReadIds(const std::string& body, size_t want,
                                                      std::span<uint64_t> out) const {
  // The protocol's reply (protocol/id_reply.h): one decimal per line, strictly
  // increasing; then this client's own bounds: none older than max_age nor further ahead
  // than max_ahead.
  auto read = protocol::ReadIdsText(body, out.first(std::min(want, out.size())));
  if (!read) return tl::unexpected(std::move(read.error()));
  const int64_t now_ms = clock_.NowUnixMs();
  const int64_t oldest_ms = now_ms - max_age_.count();
  const int64_t newest_ms = now_ms + max_ahead_.count();
  for (const uint64_t id : out.first(*read)) {
    const int64_t id_ms = layout_.epoch_unix_ms() + layout_.OffsetMsOf(id);
    if (id_ms < oldest_ms) {
      return tl::unexpected(
          "an ID " + std::to_string(now_ms - id_ms) + " ms old (more than remote_max_age " +
          std::to_string(max_age_.count()) + " ms; is its clock or its epoch different?)");
    }
    // Never admitted: it would raise the last returned ID that far ahead, and every take
    // would then refuse correct sources (below it) until this host's clock caught up.
    if (id_ms > newest_ms) {
      return tl::unexpected(
          "an ID " + std::to_string(id_ms - now_ms) +
          " ms ahead of this host's clock (more than remote_max_ahead " +
          std::to_string(max_ahead_.count()) +
          " ms): its clock is fast, or its epoch or layout is not this client's (" +
          std::to_string(layout_.epoch_unix_ms()) + " ms, " + FormatIdBits(layout_.bits()) + ")");
    }
  }
  return *read;
}

}  // namespace snowflake::detail
