#include "util/backoff.h"

#include <algorithm>

#include "util/debug_assert.h"

namespace snowflake::util {

Backoff::Backoff(std::chrono::milliseconds first, std::chrono::milliseconds cap, uint64_t seed)
    : cap_(cap), nominal_(first), random_(seed) {
  SNOWFLAKE_REQUIRE(first.count() > 0 && first <= cap);
}

std::chrono::milliseconds Backoff::Next() {
  const int64_t high = nominal_.count();
  const int64_t low = high / 2;
  std::uniform_int_distribution<int64_t> pick(low, high);
  const std::chrono::milliseconds delay(pick(random_));
  nominal_ = std::min(cap_, nominal_ * 2);
  return delay;
}

}  // namespace snowflake::util
