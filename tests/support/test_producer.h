// The one way tests make a segment: RingProducer::CreateOrOpen with the test's options,
// or the test failed naming the error (ADD_FAILURE, then an exception that gtest reports
// and that ends the test), so no test dereferences a segment that was never made. Header
// only: its users link snowflake::shm.

#ifndef SNOWFLAKE_TESTS_SUPPORT_TEST_PRODUCER_H_
#define SNOWFLAKE_TESTS_SUPPORT_TEST_PRODUCER_H_

#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>

#include "snowflake/ring_producer.h"
#include "snowflake/segment_error.h"

namespace snowflake::testing {

inline shm::RingProducer MakeProducer(const shm::ProducerOptions& options) {
  auto producer = shm::RingProducer::CreateOrOpen(options);
  if (!producer) {
    ADD_FAILURE() << "cannot make the test's segment in " << options.runtime_dir << ": "
                  << shm::SegmentErrorName(producer.error().code) << ": "
                  << producer.error().message;
    throw std::runtime_error(producer.error().message);
  }
  return std::move(*producer);
}

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_TEST_PRODUCER_H_
