// Takes three IDs through the installed C++ API; the runtime directory comes from
// $SNOWFLAKE_RUNTIME_DIR. Prints "ok" and the IDs, or the error, and exits 0 or 1.
#include <snowflake/client.h>

#include <cstdio>

int main() {
  auto client = snowflake::Client::Open("consumer");
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().message.c_str());
    return 1;
  }
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto id = client->Next();
    if (!id || *id <= last) {
      std::fprintf(stderr, "%s\n", id ? "not increasing" : id.error().message.c_str());
      return 1;
    }
    last = *id;
    auto decoded = client->Decode(*id);
    std::printf("%llu machine=%u\n", static_cast<unsigned long long>(*id), decoded->machine);
  }
  std::printf("ok\n");
  return 0;
}
