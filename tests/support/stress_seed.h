// The seed of a randomized stress test: SNOWFLAKE_STRESS_SEED if set (to replay a printed
// seed), else a fresh random one. Every stress test prints the seed it used.

#ifndef SNOWFLAKE_TESTS_SUPPORT_STRESS_SEED_H_
#define SNOWFLAKE_TESTS_SUPPORT_STRESS_SEED_H_

#include <cstdint>
#include <cstdlib>
#include <random>

namespace snowflake::testing {

inline uint64_t StressSeedFromEnv() {
  if (const char* text = std::getenv("SNOWFLAKE_STRESS_SEED")) {
    return std::strtoull(text, nullptr, 0);
  }
  return std::random_device{}();
}

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_STRESS_SEED_H_
