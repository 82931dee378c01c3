// A MachineRegister in memory whose answers a test sets: failures, a lost claim, a slow
// answer. Safe for concurrent use (the test thread sets, the reservation thread calls).

#ifndef SNOWFLAKE_TESTS_DAEMON_FAKE_REGISTER_H_
#define SNOWFLAKE_TESTS_DAEMON_FAKE_REGISTER_H_

#include <atomic>
#include <mutex>
#include <optional>

#include "register/machine_register.h"

namespace snowflake::testing {

class FakeRegister final : public reg::MachineRegister {
 public:
  tl::expected<reg::MachineClaim, reg::RegisterError> Claim(
      const reg::ClaimRequest&) noexcept override {
    return reg::MachineClaim{.machine = 3, .high_water_unix_ms = mark_.load()};
  }
  tl::expected<void, reg::RegisterError> UpdateHighWater(int64_t unix_ms) noexcept override {
    if (auto failed = Failure()) return tl::unexpected(*failed);
    int64_t seen = mark_.load();
    while (unix_ms > seen && !mark_.compare_exchange_weak(seen, unix_ms)) {
    }
    return {};
  }
  tl::expected<void, reg::RegisterError> Renew() noexcept override {
    if (auto failed = Failure()) return tl::unexpected(*failed);
    return {};
  }
  tl::expected<void, reg::RegisterError> RecordCleanStop(int64_t unix_ms) noexcept override {
    mark_.store(unix_ms);
    return {};
  }
  int64_t fence_unix_ms() const noexcept override { return fence_.load(); }
  tl::expected<void, reg::RegisterError> AcknowledgeFence(int64_t unix_ms) noexcept override {
    if (auto failed = Failure()) return tl::unexpected(*failed);
    acknowledged_.store(unix_ms);
    return {};
  }
  std::string_view backend_name() const noexcept override { return "fake"; }
  std::string location() const override { return "memory"; }

  void Fail(std::optional<reg::RegisterErrorCode> code) {
    std::lock_guard lock(mutex_);
    failure_ = code;
  }
  int64_t mark() const { return mark_.load(); }
  // An operator's fence, as the next call finds it; and the fence acknowledged so far.
  void Fence(int64_t unix_ms) { fence_.store(unix_ms); }
  int64_t acknowledged() const { return acknowledged_.load(); }

 private:
  std::optional<reg::RegisterError> Failure() {
    std::lock_guard lock(mutex_);
    if (!failure_) return std::nullopt;
    return reg::RegisterError{*failure_, "the fake register fails"};
  }

  std::atomic<int64_t> mark_{0};
  std::atomic<int64_t> fence_{0};
  std::atomic<int64_t> acknowledged_{0};
  std::mutex mutex_;
  std::optional<reg::RegisterErrorCode> failure_;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FAKE_REGISTER_H_
