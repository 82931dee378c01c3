#include "tls_test_client.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace snowflake::testing {
namespace {

size_t AppendTo(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t HeaderTo(char* data, size_t size, size_t count, void* user) {
  const std::string_view line(data, size * count);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    std::string lower(line.substr(0, kName.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kName) {
      std::string value(line.substr(kName.size()));
      while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
      *static_cast<std::string*>(user) = value;
    }
  }
  return size * count;
}

}  // namespace

HttpsClient::HttpsClient(TlsClientFiles files, TlsVersions versions)
    : files_(std::move(files)), versions_(versions) {
  static std::once_flag ready;
  std::call_once(ready, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  handle_ = curl_easy_init();
}

HttpsClient::~HttpsClient() { curl_easy_cleanup(static_cast<CURL*>(handle_)); }

void HttpsClient::Reset() {
  curl_easy_cleanup(static_cast<CURL*>(handle_));
  handle_ = curl_easy_init();
}

HttpsReply HttpsClient::Get(uint16_t port, std::string_view target) {
  CURL* curl = static_cast<CURL*>(handle_);
  HttpsReply reply;
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + std::string(target);
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 20000L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(curl, CURLOPT_CAINFO, files_.ca.c_str());
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!files_.cert.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, files_.cert.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, files_.key.c_str());
  }
  long version = CURL_SSLVERSION_TLSv1_2;
  if (versions_ == TlsVersions::kOnly12)
    version =
        static_cast<long>(CURL_SSLVERSION_TLSv1_2) | static_cast<long>(CURL_SSLVERSION_MAX_TLSv1_2);
  if (versions_ == TlsVersions::kOnly13) version = CURL_SSLVERSION_TLSv1_3;
  curl_easy_setopt(curl, CURLOPT_SSLVERSION, version);
  curl_easy_setopt(curl, CURLOPT_CERTINFO, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendTo);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &HeaderTo);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply.retry_after);
  const CURLcode rc = curl_easy_perform(curl);
  reply.curl_code = static_cast<int>(rc);
  if (rc != CURLE_OK) reply.error = error[0] != '\0' ? error : curl_easy_strerror(rc);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &reply.new_connections);
  curl_certinfo* certs = nullptr;
  if (curl_easy_getinfo(curl, CURLINFO_CERTINFO, &certs) == CURLE_OK && certs != nullptr &&
      certs->num_of_certs > 0 && reply.new_connections > 0) {
    for (curl_slist* item = certs->certinfo[0]; item != nullptr; item = item->next) {
      const std::string_view field(item->data);
      if (field.starts_with("Subject:")) reply.subject = std::string(field.substr(8));
    }
  }
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  return reply;
}

}  // namespace snowflake::testing
