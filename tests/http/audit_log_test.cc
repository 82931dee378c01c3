// AuditLog (daemon/http/audit_log.h) alone, over a time the test moves: at most `lines`
// lines of a kind per interval pass, the rest are counted, and the count is written once
// the interval is over (before the kind's next line, or by a flush); kinds are limited
// apart; every event is either a line or counted in a summary, also from many threads;
// and a line is one greppable line whatever a peer put in its certificate.

#include "daemon/http/audit_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "manual_clock.h"

namespace snowflake::daemon {
namespace {

using namespace std::chrono_literals;

// An AuditLog over a clock the test moves (the daemon's Clock seam), writing into lines().
class AuditLogTest : public ::testing::Test {
 protected:
  AuditLog Make(uint32_t lines = 10, std::chrono::milliseconds interval = 10s) {
    return AuditLog(clock_, AuditLog::Limits{lines, interval}, [this](std::string_view line) {
      std::lock_guard lock(mutex_);
      lines_.emplace_back(line);
    });
  }
  void Advance(std::chrono::milliseconds by) { clock_.Tick(by.count()); }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  // Lines starting with `prefix`.
  size_t Count(std::string_view prefix) const {
    size_t n = 0;
    for (const std::string& line : lines()) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }

  static void Refused(AuditLog& log, int i) {
    log.Record(AuditEvent::kRefusedAllow,
               [&](AuditLine& line) { line.Number("n", static_cast<uint64_t>(i)); });
  }

 private:
  testing::ManualClock clock_{1'700'000'000'000};
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST_F(AuditLogTest, TheFirstLinesOfAnIntervalPassAndTheRestAreCountedAndSummedUpAfterIt) {
  AuditLog sut = Make(10, 10s);
  int filled = 0;
  for (int i = 0; i < 200; ++i) {
    sut.Record(AuditEvent::kRefusedAllow, [&](AuditLine& line) {
      ++filled;
      line.Number("n", static_cast<uint64_t>(i));
    });
    Advance(10ms);  // 200 events in 2 s: one interval
  }
  EXPECT_EQ(filled, 10) << "a suppressed event was formatted";
  ASSERT_EQ(lines().size(), 10u);
  EXPECT_EQ(lines().front(), "audit: refused_allow n=0");
  EXPECT_EQ(lines().back(), "audit: refused_allow n=9");

  // Still within the interval: nothing more, not even the summary.
  Advance(7s);
  Refused(sut, 200);
  sut.Flush();
  EXPECT_EQ(lines().size(), 10u);

  // The interval is over: the next line of the kind comes after the count of the dropped.
  Advance(1100ms);
  Refused(sut, 201);
  ASSERT_EQ(lines().size(), 12u);
  EXPECT_EQ(lines()[10], "audit: suppressed kind=refused_allow dropped=191 limit=10/10s");
  EXPECT_EQ(lines()[11], "audit: refused_allow n=201");
}

TEST_F(AuditLogTest, AFloodThatStoppedIsSummedUpByTheFlushOnceItsIntervalIsOver) {
  AuditLog sut = Make(3, 2s);
  for (int i = 0; i < 50; ++i) Refused(sut, i);
  sut.Flush();
  EXPECT_EQ(lines().size(), 3u) << "summed up before the interval was over";
  Advance(1999ms);
  sut.Flush();
  EXPECT_EQ(lines().size(), 3u);
  Advance(1ms);
  sut.Flush();
  ASSERT_EQ(lines().size(), 4u);
  EXPECT_EQ(lines().back(), "audit: suppressed kind=refused_allow dropped=47 limit=3/2s");
  // Summed up once: a later flush has nothing to add, and a new interval lets lines pass.
  Advance(10s);
  sut.Flush();
  Refused(sut, 50);
  ASSERT_EQ(lines().size(), 5u);
  EXPECT_EQ(lines().back(), "audit: refused_allow n=50");
}

TEST_F(AuditLogTest, EachKindHasItsOwnLimit) {
  AuditLog sut = Make(2, 10s);
  for (int i = 0; i < 20; ++i) Refused(sut, i);
  sut.Record(AuditEvent::kHandshakeRefused, [](AuditLine& line) { line.Quoted("reason", "a"); });
  sut.Record(AuditEvent::kTlsRotated, [](AuditLine& line) { line.Field("file", "/x"); });
  EXPECT_EQ(Count("audit: refused_allow "), 2u);
  EXPECT_EQ(Count("audit: handshake_refused reason=\"a\""), 1u);
  EXPECT_EQ(Count("audit: tls_rotated file=/x"), 1u);
  sut.FlushAll();  // at stop: the interval need not be over
  EXPECT_EQ(Count("audit: suppressed kind=refused_allow dropped=18 limit=2/10s"), 1u);
  EXPECT_EQ(Count("audit: suppressed "), 1u);
}

TEST_F(AuditLogTest, FromManyThreadsEveryEventIsALineOrCountedOnce) {
  AuditLog sut = Make(10, 1s);
  constexpr int kThreads = 4;
  constexpr int kEach = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        Refused(sut, i);
        if (t == 0 && i % 50 == 0) Advance(100ms);  // intervals turn while the others write
        if (t == 1 && i % 500 == 0) sut.Flush();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  sut.FlushAll();
  uint64_t written = 0;
  uint64_t dropped = 0;
  for (const std::string& line : lines()) {
    if (line.rfind("audit: refused_allow ", 0) == 0) {
      ++written;
    } else {
      const size_t at = line.find("dropped=");
      ASSERT_NE(at, std::string::npos) << line;
      dropped += std::stoull(line.substr(at + 8));
    }
  }
  EXPECT_EQ(written + dropped, static_cast<uint64_t>(kThreads * kEach));
  // The test's clock moves 10 s (100 steps of 100 ms): about 10 intervals of 1 s, and at
  // an interval's turn a thread may let a line more through.
  EXPECT_LE(written, 10u * 12 + kThreads * 12);
  EXPECT_GE(written, 10u);
}

TEST_F(AuditLogTest, ALineNamesThePeerItsSourceIdentityAndSerialAndQuotesWhatAPeerWrote) {
  AuditLog sut = Make();
  const IpAddress v4 = ParseIpAddress("203.0.113.7").value();
  const IpAddress v6 = ParseIpAddress("2001:db8:1:2:3:4:5:6").value();
  sut.Record(AuditEvent::kHandshakeRefused, [&](AuditLine& line) {
    line.Peer(AuditPeer{&v4, "", ""})
        .Quoted("reason", "certificate verify failed: certificate has expired");
  });
  sut.Record(AuditEvent::kThrottled, [&](AuditLine& line) {
    line.Peer(AuditPeer{&v6, "uri:spiffe://x/y", "0A1B"}).Field("service", "orders");
  });
  sut.Record(AuditEvent::kForbidden, [&](AuditLine& line) {
    line.Peer(AuditPeer{nullptr, "uri:a b\"c\n", ""}).Quoted("reason", "x\\y");
  });
  sut.Record(AuditEvent::kTlsRotated, [&](AuditLine& line) {
    line.Time("old_not_after", 1767225600).Time("new_not_after", 0);
  });
  ASSERT_EQ(lines().size(), 4u);
  EXPECT_EQ(lines()[0],
            "audit: handshake_refused peer=203.0.113.7 source=203.0.113.7 identity=- serial=- "
            "reason=\"certificate verify failed: certificate has expired\"");
  EXPECT_EQ(lines()[1],
            "audit: throttled peer=2001:db8:1:2:3:4:5:6 source=2001:db8:1:2::/64 "
            "identity=uri:spiffe://x/y serial=0A1B service=orders");
  EXPECT_EQ(lines()[2],
            "audit: forbidden peer=- source=- identity=\"uri:a b\\\"c\\x0a\" serial=- "
            "reason=\"x\\\\y\"");
  EXPECT_EQ(lines()[3], "audit: tls_rotated old_not_after=2026-01-01T00:00:00Z new_not_after=-");
}

TEST(AuditEventName, EveryKindHasItsName) {
  EXPECT_EQ(AuditEventName(AuditEvent::kRefusedAllow), "refused_allow");
  EXPECT_EQ(AuditEventName(AuditEvent::kRefusedSource), "refused_source");
  EXPECT_EQ(AuditEventName(AuditEvent::kRefusedHandshakes), "refused_handshakes");
  EXPECT_EQ(AuditEventName(AuditEvent::kRefusedConnections), "refused_connections");
  EXPECT_EQ(AuditEventName(AuditEvent::kHandshakeRefused), "handshake_refused");
  EXPECT_EQ(AuditEventName(AuditEvent::kHandshakeFailed), "handshake_failed");
  EXPECT_EQ(AuditEventName(AuditEvent::kThrottled), "throttled");
  EXPECT_EQ(AuditEventName(AuditEvent::kForbidden), "forbidden");
  EXPECT_EQ(AuditEventName(AuditEvent::kTlsRotated), "tls_rotated");
  EXPECT_EQ(AuditEventName(AuditEvent::kTlsRotationRefused), "tls_rotation_refused");
}

}  // namespace
}  // namespace snowflake::daemon
