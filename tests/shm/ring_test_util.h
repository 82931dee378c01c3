// Helpers shared by the ring tests: making producers and consumers in a TempDir and
// failing the test (with the error's message) when that is impossible.

#ifndef SNOWFLAKE_TESTS_SHM_RING_TEST_UTIL_H_
#define SNOWFLAKE_TESTS_SHM_RING_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "snowflake/id_layout.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "snowflake/segment_error.h"
#include "test_producer.h"

namespace snowflake::shm::testing {

inline constexpr uint32_t kTestMachine = 7;

inline ProducerOptions OptionsFor(const std::filesystem::path& dir, uint64_t capacity) {
  ProducerOptions options;
  options.runtime_dir = dir;
  options.capacity = capacity;
  options.epoch_unix_ms = kDefaultEpochUnixMs;
  options.machine = kTestMachine;
  return options;
}

// Returns the value, or records a failure naming the error and throws (gtest reports the
// exception and ends the test).
template <typename T>
T Unwrap(tl::expected<T, SegmentFailure> result) {
  if (!result) {
    ADD_FAILURE() << SegmentErrorName(result.error().code) << ": " << result.error().message;
    throw std::runtime_error(result.error().message);
  }
  return std::move(*result);
}

// A producer of `options` (test_producer.h), or of OptionsFor(dir, capacity).
using snowflake::testing::MakeProducer;
inline RingProducer MakeProducer(const std::filesystem::path& dir, uint64_t capacity) {
  return snowflake::testing::MakeProducer(OptionsFor(dir, capacity));
}

// A consumer of the segment `producer` serves in `dir`, holding its consumer region as a
// client does after attach.
inline RingConsumer MakeConsumer(const std::filesystem::path& dir, const RingProducer& producer) {
  return Unwrap(RingConsumer::Open(dir, producer.ConsumerDescriptor()));
}

// A consumer as MakeConsumer's, reading `clock` (not owned; it must outlive the consumer).
inline RingConsumer MakeConsumer(const std::filesystem::path& dir, const RingProducer& producer,
                                 Clock& clock) {
  ConsumerOptions options;
  options.clock = &clock;
  return Unwrap(RingConsumer::Open(dir, producer.ConsumerDescriptor(), options));
}

// The heartbeat `consumer` sees in the header, as a time on the monotonic clock: a
// CheckProducer() at BeatOf(...) + age judges a beat `age` old without waiting for it.
inline Clock::SteadyTime BeatOf(const RingConsumer& consumer) {
  return Clock::SteadyTime(std::chrono::nanoseconds(consumer.header().heartbeat_mono_ns.load()));
}

// The ring file of `dir` alone (RingConsumer::Observe): for a test whose producer is gone or
// in another process, to read its state and header.
inline RingConsumer Observe(const std::filesystem::path& dir) {
  return Unwrap(RingConsumer::Observe(dir));
}

// first, first+1, ..., first+count-1.
inline std::vector<uint64_t> Range(uint64_t first, size_t count) {
  std::vector<uint64_t> ids(count);
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

}  // namespace snowflake::shm::testing

#endif  // SNOWFLAKE_TESTS_SHM_RING_TEST_UTIL_H_
