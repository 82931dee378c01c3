// The C ABI under misuse (docs/security.md): each bad call gets a status and a message,
// never a crash and never SF_OK. Linked against the shared library, as C callers are.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "snowflake/snowflake.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace snowflake {
namespace {

using testing::kTestProducerPath;
using testing::Process;
using testing::TempDir;

// sf_options with every byte of a larger buffer set, so a library that reads past
// struct_size (or half a pointer) sees garbage rather than luckily zero bytes.
struct PaddedOptions {
  sf_options opts;
  unsigned char tail[64];
};

PaddedOptions Garbage(uint32_t struct_size, const char* runtime_dir) {
  PaddedOptions p;
  std::memset(&p, 0xAB, sizeof(p));
  p.opts.struct_size = struct_size;
  p.opts.wait_timeout_ms = 10;
  p.opts.runtime_dir = runtime_dir;
  p.opts.max_heartbeat_age_ms = 50;
  // Pointer fields: garbage there would be dereferenced.
  p.opts.remotes = nullptr;
  p.opts.remotes_ca = nullptr;
  p.opts.remotes_cert = nullptr;
  p.opts.remotes_key = nullptr;
  return p;
}

TEST(CApiMisuse, StructSizeInsideAFieldIsRefused) {
  TempDir dir("c-api-misuse");
  for (const uint32_t size : {9u, 10u, 12u, 15u, 17u, 19u, 21u, 23u, 28u, 36u, 44u, 52u}) {
    PaddedOptions p = Garbage(size, dir.path().c_str());
    sf_client* c = reinterpret_cast<sf_client*>(0x1);

    const sf_status status = sf_open("orders", &p.opts, &c);

    EXPECT_EQ(status, SF_INVALID_ARGUMENT) << size;
    EXPECT_EQ(c, nullptr) << size;
    EXPECT_NE(std::string(sf_last_error()).find("ends inside a field"), std::string::npos)
        << size << ": " << sf_last_error();
  }
}

TEST(CApiMisuse, StructSizeTooSmallOrHugeIsRefused) {
  for (const uint32_t size : {0u, 1u, 4u, 7u, 257u, 4096u, 0xFFFFFFFFu}) {
    PaddedOptions p = Garbage(size, nullptr);
    sf_client* c = nullptr;

    EXPECT_EQ(sf_open("orders", &p.opts, &c), SF_INVALID_ARGUMENT) << size;
    EXPECT_EQ(c, nullptr);
  }
}

TEST(CApiMisuse, StructSizeAtEachFieldEndIsAccepted) {
  // Accepted options reach the open, which fails only because no daemon runs here.
  TempDir dir("c-api-misuse");
  setenv("SNOWFLAKE_RUNTIME_DIR", dir.path().c_str(), 1);
  for (const uint32_t size : {8u, 16u, 20u, 24u}) {
    PaddedOptions p = Garbage(size, dir.path().c_str());
    if (size >= 24) p.opts.reserved = 0;
    sf_client* c = nullptr;

    EXPECT_EQ(sf_open("orders", &p.opts, &c), SF_DAEMON_NOT_RUNNING)
        << size << ": " << sf_last_error();
  }
  unsetenv("SNOWFLAKE_RUNTIME_DIR");
}

// remotes NULL reads $SNOWFLAKE_REMOTES; remotes "" is none, whatever the environment says.
// Seen at open: with no local daemon, a client with remotes opens (it takes from them),
// one without fails with SF_DAEMON_NOT_RUNNING. No remote is contacted.
TEST(CApi, AnEmptyRemotesStringIgnoresTheEnvironment) {
  TempDir dir("c-api-remotes");
  setenv("SNOWFLAKE_REMOTES", "127.0.0.1:9", 1);
  sf_options opts;
  sf_options_init(&opts);
  opts.runtime_dir = dir.path().c_str();
  sf_client* c = nullptr;

  ASSERT_EQ(sf_open("orders", &opts, &c), SF_OK) << sf_last_error();
  sf_close(c);
  opts.remotes = "";
  EXPECT_EQ(sf_open("orders", &opts, &c), SF_DAEMON_NOT_RUNNING) << sf_last_error();
  EXPECT_EQ(c, nullptr);
  unsetenv("SNOWFLAKE_REMOTES");
}

TEST(CApiMisuse, NonZeroReservedIsRefused) {
  sf_options opts;
  sf_options_init(&opts);
  opts.reserved = 1;
  sf_client* c = nullptr;

  EXPECT_EQ(sf_open("orders", &opts, &c), SF_INVALID_ARGUMENT);
  EXPECT_STREQ(sf_last_error(), "sf_open: sf_options.reserved must be 0");
}

TEST(CApiMisuse, ANewerHeadersUnsetFieldsAreAcceptedAndSetOnesRefused) {
  TempDir dir("c-api-misuse");
  PaddedOptions p = Garbage(sizeof(sf_options) + 16, dir.path().c_str());
  p.opts.reserved = 0;
  std::memset(p.tail, 0, sizeof(p.tail));
  sf_client* c = nullptr;

  EXPECT_EQ(sf_open("orders", &p.opts, &c), SF_DAEMON_NOT_RUNNING) << sf_last_error();
  p.tail[15] = 1;
  EXPECT_EQ(sf_open("orders", &p.opts, &c), SF_INVALID_ARGUMENT);
}

TEST(CApiMisuse, NullAndBadArgumentsAreRefused) {
  sf_client* c = reinterpret_cast<sf_client*>(0x1);
  uint64_t id = 0;
  uint64_t ids[4];
  size_t got = 99;
  sf_decoded_id decoded;

  EXPECT_EQ(sf_open("orders", nullptr, nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_open(nullptr, nullptr, &c), SF_INVALID_SERVICE_NAME);
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(sf_next(nullptr, &id), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_next_batch(nullptr, ids, 4, &got), SF_INVALID_ARGUMENT);
  EXPECT_EQ(got, 0u);
  EXPECT_EQ(sf_decode(nullptr, 1, nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_decode(nullptr, uint64_t{1} << 63, &decoded), SF_INVALID_ARGUMENT);
  sf_close(nullptr);
  sf_options_init(nullptr);
  EXPECT_STREQ(sf_status_str(static_cast<sf_status>(999)), "unknown_status");
  EXPECT_STRNE(sf_last_error(), "");
}

TEST(CApiMisuse, BadServiceNamesAreRefused) {
  for (const std::string& name :
       {std::string(), std::string("Orders"), std::string(64, 'a'), std::string("a b"),
        std::string("\xff\xfe"), std::string("ok\nnext")}) {
    sf_client* c = nullptr;

    EXPECT_EQ(sf_open(name.c_str(), nullptr, &c), SF_INVALID_SERVICE_NAME) << name;
    EXPECT_EQ(c, nullptr);
  }
}

TEST(CApiMisuse, NullPointersOnAnOpenClientAreRefused) {
  TempDir dir("c-api-misuse");
  Process producer = Process::Spawn({kTestProducerPath, dir.path().string(), "64"});
  ASSERT_TRUE(producer.WaitForOutput(Process::Stream::kOut, "serving", std::chrono::seconds(20)))
      << producer.err();
  sf_options opts;
  sf_options_init(&opts);
  opts.runtime_dir = dir.path().c_str();
  opts.wait_timeout_ms = 10'000;  // generous: a loaded, sanitized host
  opts.max_heartbeat_age_ms = 5'000;
  sf_client* c = nullptr;
  ASSERT_EQ(sf_open("orders", &opts, &c), SF_OK) << sf_last_error();
  uint64_t ids[4];
  size_t got = 99;

  EXPECT_EQ(sf_next(c, nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_next_batch(c, nullptr, 4, &got), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_next_batch(c, ids, 4, nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_next_batch(c, ids, 0, &got), SF_INVALID_ARGUMENT);
  EXPECT_EQ(got, 0u);
  EXPECT_EQ(sf_decode(c, 1, nullptr), SF_INVALID_ARGUMENT);
  uint64_t id = 0;
  EXPECT_EQ(sf_next(c, &id), SF_OK) << sf_last_error();  // the client still works
  sf_close(c);
}

// A program a client execs (a shell, a helper) inherits no fd to the segment: before,
// the segment stayed open read-write without O_CLOEXEC for the Client's lifetime.
TEST(ClientFds, AProgramExecedByAClientInheritsNoSegmentFd) {
  // Arrange: an open client that has taken an ID.
  TempDir dir("client-exec");
  Process producer = Process::Spawn({kTestProducerPath, dir.path().string(), "64"});
  ASSERT_TRUE(producer.WaitForOutput(Process::Stream::kOut, "serving", std::chrono::seconds(20)))
      << producer.err();
  sf_options opts;
  sf_options_init(&opts);
  opts.runtime_dir = dir.path().c_str();
  opts.wait_timeout_ms = 10'000;  // generous: a loaded, sanitized host
  opts.max_heartbeat_age_ms = 5'000;
  sf_client* c = nullptr;
  ASSERT_EQ(sf_open("orders", &opts, &c), SF_OK) << sf_last_error();
  uint64_t id = 0;
  ASSERT_EQ(sf_next(c, &id), SF_OK) << sf_last_error();

  // Act: the child lists where its own fds point.
  auto result = testing::RunCommand(
      {"/bin/ls", "-l", "/proc/self/fd/"});
  sf_close(c);

  // Assert
  ASSERT_TRUE(result.status.ExitedWith(0)) << result.err;
  EXPECT_EQ(result.out.find("snowflake.ring"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find(dir.path().string()), std::string::npos) << result.out;
}

}  // namespace
}  // namespace snowflake
