#include "fleet_sim_etcd.h"

#include <curl/curl.h>

#include <cstdlib>
#include <sstream>
#include <string_view>

namespace snowflake::testing {
namespace {

size_t Append(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// A curl handle with the settings every call here shares (loopback, no proxy, no signals).
CURL* NewHandle(const std::string& url, long timeout_ms) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return nullptr;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  return curl;
}

// The metric's name and, for grpc_server_started_total, its grpc_method label.
void AddSample(std::string_view line, MemberMetrics& out) {
  const size_t space = line.rfind(' ');
  if (space == std::string_view::npos) return;
  const std::string_view series = line.substr(0, space);
  const double value = std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  const size_t brace = series.find('{');
  const std::string name(series.substr(0, brace));
  out.by_name[name] += value;
  if (name == "grpc_server_started_total" && brace != std::string_view::npos) {
    const std::string_view key = "grpc_method=\"";
    const size_t at = series.find(key);
    if (at == std::string_view::npos) return;
    const size_t start = at + key.size();
    const size_t end = series.find('"', start);
    out.started_by_method[std::string(series.substr(start, end - start))] += value;
  }
}

}  // namespace

std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

tl::expected<MemberMetrics, std::string> ScrapeMetrics(const std::string& client_url) {
  const std::string url = client_url + "/metrics";
  CURL* curl = NewHandle(url, 10'000);
  if (curl == nullptr) return tl::unexpected(std::string("curl_easy_init failed"));
  std::string body;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) return tl::unexpected("GET " + url + ": " + curl_easy_strerror(rc));
  if (status != 200) return tl::unexpected("GET " + url + ": HTTP " + std::to_string(status));
  MemberMetrics out;
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    AddSample(line, out);
  }
  if (out.by_name.empty()) return tl::unexpected("GET " + url + ": no samples in the answer");
  return out;
}

tl::expected<nlohmann::json, std::string> GatewayPost(const std::string& client_url,
                                                      const std::string& path,
                                                      const nlohmann::json& body) {
  const std::string url = client_url + path;
  const std::string text = body.dump();
  CURL* curl = NewHandle(url, 10'000);
  if (curl == nullptr) return tl::unexpected(std::string("curl_easy_init failed"));
  std::string answer;
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) return tl::unexpected("POST " + url + ": " + curl_easy_strerror(rc));
  if (status != 200) {
    return tl::unexpected("POST " + url + ": HTTP " + std::to_string(status) + ": " + answer);
  }
  auto j = nlohmann::json::parse(answer, nullptr, false);
  if (j.is_discarded()) return tl::unexpected("POST " + url + ": not JSON: " + answer);
  return j;
}

namespace {

// The watch's state while curl streams its answer.
struct WatchStream {
  const std::string* end_key;
  const std::function<void(const HistoryEvent&)>* sink;
  const std::atomic<bool>* cancel;
  std::string pending;  // the start of a line not complete yet
  uint64_t events = 0;
  bool reached_end = false;
  std::string error;
};

size_t OnWatchData(char* data, size_t size, size_t count, void* user) {
  auto& w = *static_cast<WatchStream*>(user);
  w.pending.append(data, size * count);
  size_t start = 0;
  for (;;) {
    const size_t newline = w.pending.find('\n', start);
    if (newline == std::string::npos) break;
    const std::string_view line(w.pending.data() + start, newline - start);
    start = newline + 1;
    if (line.empty()) continue;
    auto events = ParseWatchLine(line);
    if (!events) {
      w.error = events.error();
      return 0;  // ends the transfer
    }
    for (const HistoryEvent& e : *events) {
      ++w.events;
      (*w.sink)(e);
      if (!e.deleted && e.key == *w.end_key) {
        w.reached_end = true;
        return 0;
      }
    }
  }
  w.pending.erase(0, start);
  return size * count;
}

// Called by curl about once a second, and on every transfer: non-zero ends the watch.
int OnWatchProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto& w = *static_cast<WatchStream*>(user);
  return w.cancel != nullptr && w.cancel->load() ? 1 : 0;
}

}  // namespace

tl::expected<uint64_t, std::string> ReadHistory(
    const std::string& client_url, const std::string& prefix, const std::string& end_key,
    const std::function<void(const HistoryEvent&)>& sink, std::chrono::seconds timeout,
    const std::atomic<bool>* cancel) {
  const std::string url = client_url + "/v3/watch";
  const nlohmann::json request = {{"create_request",
                                   {{"key", Base64Encode(prefix)},
                                    {"range_end", Base64Encode(PrefixEnd(prefix))},
                                    {"start_revision", "1"}}}};
  const std::string text = request.dump();
  CURL* curl = NewHandle(url, static_cast<long>(timeout.count() * 1000));
  if (curl == nullptr) return tl::unexpected(std::string("curl_easy_init failed"));
  WatchStream stream{&end_key, &sink, cancel, {}, 0, false, {}};
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnWatchData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &stream);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &OnWatchProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &stream);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  if (stream.reached_end) return stream.events;
  if (!stream.error.empty()) return tl::unexpected("watch " + url + ": " + stream.error);
  if (cancel != nullptr && cancel->load()) return tl::unexpected(std::string("cancelled"));
  return tl::unexpected("watch " + url + " ended before " + end_key + " after " +
                        std::to_string(stream.events) + " events: " + curl_easy_strerror(rc));
}

}  // namespace snowflake::testing
