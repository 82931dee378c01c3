// The debug-only check behind every `// REQUIRES:` of the daemon (iceoryx's IOX_ASSERT):
// misuse by our own code, caught in debug builds (the debug and tsan presets), free in
// release builds. Never for anything that could happen in correct use, and never for
// "this would risk a duplicate", which is an always-on check that stops serving.

#ifndef SNOWFLAKE_UTIL_DEBUG_ASSERT_H_
#define SNOWFLAKE_UTIL_DEBUG_ASSERT_H_

#include <cstdio>
#include <cstdlib>

#ifdef NDEBUG
#define SNOWFLAKE_REQUIRE(condition) static_cast<void>(0)
#else
#define SNOWFLAKE_REQUIRE(condition)                                                              \
  ((condition)                                                                                    \
       ? static_cast<void>(0)                                                                     \
       : (std::fprintf(stderr, "%s:%d: REQUIRES violated: %s\n", __FILE__, __LINE__, #condition), \
          std::abort()))
#endif

#endif  // SNOWFLAKE_UTIL_DEBUG_ASSERT_H_
