// The session-ticket key ring (daemon/http/tls_ticket_keys.h) on an injected steady clock,
// sealing and opening with OpenSSL's real AES-256-CBC and HMAC-SHA256, as the ticket
// callback does.
//
// Properties:
//   - a ticket sealed under key N opens while N is the current key, still opens (and asks
//     for renewal) after one rotation, and never after a second;
//   - a key seals for one period, then a new random key takes over;
//   - Forget() ends every ticket at once, and a context of an older generation seals none;
//   - under concurrent sealing and opening while the clock moves, an opened ticket always
//     yields the bytes that were sealed (checked under ThreadSanitizer as well).

#include "daemon/http/tls_ticket_keys.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "manual_clock.h"

namespace snowflake::daemon {
namespace {

using namespace std::chrono_literals;
using Opened = TlsTicketKeys::Opened;

constexpr std::chrono::seconds kPeriod{3600};

using testing::ManualClock;  // the Clock seam, moved by hand

void Advance(ManualClock& clock, std::chrono::seconds by) { clock.Tick(by.count() * 1000); }

struct CipherFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
struct MacFree {
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
};

// Fresh contexts, as OpenSSL hands the callback for each ticket.
struct Contexts {
  Contexts() {
    EVP_MAC* hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    mac.reset(EVP_MAC_CTX_new(hmac));
    EVP_MAC_free(hmac);
  }
  std::unique_ptr<EVP_CIPHER_CTX, CipherFree> cipher{EVP_CIPHER_CTX_new()};
  std::unique_ptr<EVP_MAC_CTX, MacFree> mac;
};

struct Ticket {
  unsigned char name[TlsTicketKeys::kNameBytes] = {};
  unsigned char iv[TlsTicketKeys::kIvBytes] = {};
  std::string sealed;  // ciphertext
  std::string tag;     // HMAC over the ciphertext
};

std::string Mac(EVP_MAC_CTX* mac, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t size = 0;
  if (EVP_MAC_init(mac, nullptr, 0, nullptr) != 1 ||
      EVP_MAC_update(mac, reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1 ||
      EVP_MAC_final(mac, out, &size, sizeof out) != 1) {
    return "";
  }
  return std::string(reinterpret_cast<char*>(out), size);
}

std::string Crypt(EVP_CIPHER_CTX* cipher, const std::string& in) {
  std::string out(in.size() + 32, '\0');
  int n = 0, tail = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  if (EVP_CipherUpdate(cipher, bytes, &n, reinterpret_cast<const unsigned char*>(in.data()),
                       static_cast<int>(in.size())) != 1 ||
      EVP_CipherFinal_ex(cipher, bytes + n, &tail) != 1) {
    return "(cipher failed)";
  }
  out.resize(static_cast<size_t>(n + tail));
  return out;
}

// Seals `body` as OpenSSL would; nullopt-like: an empty `sealed` if no ticket was issued.
Ticket Seal(TlsTicketKeys& sut, uint64_t generation, const std::string& body) {
  Ticket ticket;
  Contexts contexts;
  if (!sut.Seal(generation, ticket.name, ticket.iv, contexts.cipher.get(), contexts.mac.get())) {
    return ticket;
  }
  ticket.sealed = Crypt(contexts.cipher.get(), body);
  ticket.tag = Mac(contexts.mac.get(), ticket.sealed);
  return ticket;
}

// Opens `ticket`: which key did, and the bytes (only when its MAC matched).
Opened Open(TlsTicketKeys& sut, const Ticket& ticket, std::string* body) {
  Contexts contexts;
  const Opened opened = sut.Open(ticket.name, ticket.iv, contexts.cipher.get(), contexts.mac.get());
  if (opened == Opened::kNone) return opened;
  if (Mac(contexts.mac.get(), ticket.sealed) != ticket.tag) {
    *body = "(MAC mismatch)";
    return opened;
  }
  *body = Crypt(contexts.cipher.get(), ticket.sealed);
  return opened;
}

TEST(TlsTicketKeys, ATicketOpensUnderItsKeyStillAfterOneRotationAndNotAfterTwo) {
  ManualClock clock;
  TlsTicketKeys sut(kPeriod, clock);
  const Ticket ticket = Seal(sut, 0, "session of taker-a");
  ASSERT_FALSE(ticket.sealed.empty());

  std::string body;
  EXPECT_EQ(Open(sut, ticket, &body), Opened::kCurrent);
  EXPECT_EQ(body, "session of taker-a");

  Advance(clock, kPeriod);  // one rotation: the ticket's key is now the previous one
  const Ticket renewed = Seal(sut, 0, "renewed");
  EXPECT_NE(std::string(reinterpret_cast<const char*>(renewed.name), sizeof renewed.name),
            std::string(reinterpret_cast<const char*>(ticket.name), sizeof ticket.name))
      << "no new key after a whole period";
  body.clear();
  EXPECT_EQ(Open(sut, ticket, &body), Opened::kPrevious);
  EXPECT_EQ(body, "session of taker-a");

  Advance(clock, kPeriod);  // a second rotation: the ticket's key is gone
  EXPECT_EQ(Open(sut, ticket, &body), Opened::kNone);
  EXPECT_EQ(Open(sut, renewed, &body), Opened::kPrevious);
}

TEST(TlsTicketKeys, AKeySealsForOnePeriodThenANewOneTakesOver) {
  ManualClock clock;
  TlsTicketKeys sut(kPeriod, clock);
  const Ticket first = Seal(sut, 0, "a");
  Advance(clock, kPeriod - 1s);
  const Ticket same_period = Seal(sut, 0, "b");
  Advance(clock, 1s);
  const Ticket next_period = Seal(sut, 0, "c");

  const auto name = [](const Ticket& t) {
    return std::string(reinterpret_cast<const char*>(t.name), sizeof t.name);
  };
  EXPECT_EQ(name(first), name(same_period));
  EXPECT_NE(name(first), name(next_period));
}

// Rotation is lazy (at the first use past a period), so the key that became the previous
// one late must still go two periods after it was made, not at the next rotation.
TEST(TlsTicketKeys, APreviousKeyGoesTwoPeriodsAfterItWasMadeEvenBetweenRotations) {
  ManualClock clock;
  TlsTicketKeys sut(kPeriod, clock);
  const Ticket ticket = Seal(sut, 0, "a");
  Advance(clock, kPeriod + kPeriod / 2);
  const Ticket later = Seal(sut, 0, "b");  // rotates: the ticket's key is the previous one
  std::string body;
  ASSERT_EQ(Open(sut, ticket, &body), Opened::kPrevious);

  Advance(clock, kPeriod / 2);  // two periods after the ticket's key was made

  EXPECT_EQ(Open(sut, ticket, &body), Opened::kNone);
  EXPECT_EQ(Open(sut, later, &body), Opened::kCurrent);
}

TEST(TlsTicketKeys, AKeyIdleForTwoPeriodsOpensNothing) {
  ManualClock clock;
  TlsTicketKeys sut(kPeriod, clock);
  const Ticket ticket = Seal(sut, 0, "a");
  Advance(clock, 5 * kPeriod);  // no handshake in between: no rotation ran

  std::string body;
  EXPECT_EQ(Open(sut, ticket, &body), Opened::kNone);
}

TEST(TlsTicketKeys, ForgetEndsEveryTicketAndAnOlderGenerationSealsNothing) {
  ManualClock clock;
  TlsTicketKeys sut(kPeriod, clock);
  const Ticket before = Seal(sut, 0, "a");

  const uint64_t generation = sut.Forget();

  std::string body;
  EXPECT_EQ(generation, 1u);
  EXPECT_EQ(Open(sut, before, &body), Opened::kNone);
  EXPECT_TRUE(Seal(sut, 0, "old context").sealed.empty());
  const Ticket after = Seal(sut, generation, "new context");
  ASSERT_FALSE(after.sealed.empty());
  EXPECT_EQ(Open(sut, after, &body), Opened::kCurrent);
  EXPECT_EQ(body, "new context");
}

TEST(TlsTicketKeys, TwoRingsMakeDifferentKeys) {
  ManualClock clock;
  TlsTicketKeys one(kPeriod, clock);
  TlsTicketKeys two(kPeriod, clock);
  const Ticket ticket = Seal(one, 0, "a");
  std::string body;
  EXPECT_EQ(Open(two, ticket, &body), Opened::kNone);
}

// Serving threads seal and open while the clock moves: whatever opens yields exactly the
// bytes sealed (a wrong key would fail the MAC), and most tickets open.
TEST(TlsTicketKeys, ConcurrentSealAndOpenWhileRotatingNeverYieldWrongBytes) {
  ManualClock clock;
  TlsTicketKeys sut(60s, clock);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> opened{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string body = "thread " + std::to_string(t) + " ticket " + std::to_string(i);
        const Ticket ticket = Seal(sut, 0, body);
        if (ticket.sealed.empty()) continue;
        std::string got;
        if (Open(sut, ticket, &got) == Opened::kNone) continue;
        opened.fetch_add(1);
        if (got != body) wrong.fetch_add(1);
      }
    });
  }
  std::thread mover([&] {
    while (!stop.load()) {
      Advance(clock, 20s);
      std::this_thread::yield();
    }
  });
  for (auto& thread : threads) thread.join();
  stop = true;
  mover.join();

  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(opened.load(), 0u);
}

}  // namespace
}  // namespace snowflake::daemon
