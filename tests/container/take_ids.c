/* A C ABI client for the container test (tests/container/): built on the host, run on the
 * host and inside containers, where the packaged libsnowflake.so.0 serves it.
 *
 *   take_ids SERVICE COUNT     prints COUNT IDs, one per line, and "machine M" last;
 *                              exit 0, or the error ("error CODE: message") and exit 1
 *   take_ids SERVICE watch     takes an ID about every millisecond and prints it; the
 *                              first take after at least 20 IDs prints "ready" to stderr;
 *                              each failure prints "error CODE: message" once per change
 *                              of code; exits 0 once 100 IDs followed a failure (the
 *                              daemon went away and came back), 1 after 120 s without.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snowflake/snowflake.h"

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int Watch(sf_client *c) {
  const struct timespec one_ms = {0, 1000000};
  const double give_up = Now() + 120.0;
  int taken = 0, after_failure = 0, failed = 0;
  sf_status last = SF_OK;
  while (Now() < give_up) {
    uint64_t id = 0;
    const sf_status s = sf_next(c, &id);
    if (s == SF_OK) {
      printf("%llu\n", (unsigned long long)id);
      fflush(stdout);
      if (++taken == 20) fprintf(stderr, "ready\n");
      if (failed && ++after_failure == 100) return 0;
    } else if (s != last) {
      printf("error %s: %s\n", sf_status_str(s), sf_last_error());
      fflush(stdout);
      failed = 1;
      after_failure = 0;
    }
    last = s;
    nanosleep(&one_ms, NULL);
  }
  fprintf(stderr, "take_ids: no failure followed by 100 IDs within 120 s\n");
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: take_ids SERVICE COUNT|watch\n");
    return 2;
  }
  sf_client *c = NULL;
  sf_status s = sf_open(argv[1], NULL, &c);
  if (s != SF_OK) {
    printf("error %s: %s\n", sf_status_str(s), sf_last_error());
    return 1;
  }
  if (strcmp(argv[2], "watch") == 0) {
    const int rc = Watch(c);
    sf_close(c);
    return rc;
  }
  char *end = NULL;
  errno = 0;
  const long count = strtol(argv[2], &end, 10);
  if (errno != 0 || *end != '\0' || count < 1 || count > 1000000) {
    fprintf(stderr, "take_ids: COUNT must be 1..1000000, got '%s'\n", argv[2]);
    sf_close(c);
    return 2;
  }
  uint64_t id = 0;
  for (long i = 0; i < count; ++i) {
    s = sf_next(c, &id);
    if (s != SF_OK) {
      printf("error %s: %s\n", sf_status_str(s), sf_last_error());
      sf_close(c);
      return 1;
    }
    printf("%llu\n", (unsigned long long)id);
  }
  sf_decoded_id decoded;
  if (sf_decode(c, id, &decoded) == SF_OK) printf("machine %u\n", decoded.machine);
  sf_close(c);
  return 0;
}
