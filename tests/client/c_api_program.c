/* A C11 program using only snowflake/snowflake.h, built as C with -std=c11 -Wall -Werror.
 *
 *   c_api_program RUNTIME_DIR
 * Opens a client, takes IDs with sf_next and sf_next_batch, checks they strictly
 * increase, decodes one and checks the argument errors. Prints "ok" and exits 0, or
 * prints the failing status name and message and exits 1.
 *
 *   c_api_program RUNTIME_DIR --empty
 * Takes from a ring that stays empty while its daemon looks healthy, without waiting, with
 * sf_next and sf_next_batch: each must return SF_RING_EMPTY, whose action is
 * SF_ACTION_RETRY_HERE. Prints "ring_empty retry_here: <message>" and exits 0, or says
 * what it got and exits 1. */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "snowflake/snowflake.h"

static int Fail(const char *what, sf_status status) {
  printf("%s: %s: %s\n", what, sf_status_str(status), sf_last_error());
  return 1;
}

/* --empty: see the top of the file. */
static int TakeFromAnEmptyRing(sf_options *options) {
  options->wait_timeout_ms = 0;
  sf_client *client = NULL;
  sf_status status = sf_open("c-program", options, &client);
  if (status != SF_OK) return Fail("sf_open", status);
  uint64_t id = 0;
  uint64_t ids[4];
  size_t got = 1;
  const sf_status one = sf_next(client, &id);
  const sf_status batch = sf_next_batch(client, ids, 4, &got);
  sf_close(client);
  if (one != SF_RING_EMPTY || batch != SF_RING_EMPTY || got != 0) {
    printf("sf_next: %s, sf_next_batch: %s (got %zu), want ring_empty: %s\n", sf_status_str(one),
           sf_status_str(batch), got, sf_last_error());
    return 1;
  }
  if (sf_status_action(one) != SF_ACTION_RETRY_HERE ||
      strcmp(sf_action_str(sf_status_action(one)), "retry_here") != 0) {
    printf("ring_empty's action is %s, want retry_here\n", sf_action_str(sf_status_action(one)));
    return 1;
  }
  printf("%s %s: %s\n", sf_status_str(one), sf_action_str(sf_status_action(one)), sf_last_error());
  return 0;
}

int main(int argc, char **argv) {
  const int empty = argc == 3 && strcmp(argv[2], "--empty") == 0;
  if (argc != 2 && !empty) {
    fprintf(stderr, "usage: c_api_program RUNTIME_DIR [--empty]\n");
    return 2;
  }
  sf_options options;
  sf_options_init(&options);
  options.runtime_dir = argv[1];
  options.wait_timeout_ms = 10000;
  if (empty) return TakeFromAnEmptyRing(&options);

  sf_client *bad = NULL;
  if (sf_open("Not A Name", &options, &bad) != SF_INVALID_SERVICE_NAME || bad != NULL) {
    printf("an invalid service name was accepted\n");
    return 1;
  }
  if (strstr(sf_last_error(), "1 to 63 characters") == NULL) {
    printf("unexpected message: %s\n", sf_last_error());
    return 1;
  }

  sf_client *client = NULL;
  sf_status status = sf_open("c-program", &options, &client);
  if (status != SF_OK) return Fail("sf_open", status);

  uint64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    uint64_t id = 0;
    status = sf_next(client, &id);
    if (status != SF_OK) return Fail("sf_next", status);
    if (id <= last) {
      printf("not increasing: %" PRIu64 " after %" PRIu64 "\n", id, last);
      return 1;
    }
    last = id;
  }
  uint64_t ids[100];
  for (int round = 0; round < 100; ++round) {
    size_t got = 0;
    status = sf_next_batch(client, ids, 100, &got);
    if (status != SF_OK) return Fail("sf_next_batch", status);
    if (got < 1 || got > 100) {
      printf("sf_next_batch returned %zu IDs\n", got);
      return 1;
    }
    for (size_t i = 0; i < got; ++i) {
      if (ids[i] <= last) {
        printf("batch not increasing: %" PRIu64 " after %" PRIu64 "\n", ids[i], last);
        return 1;
      }
      last = ids[i];
    }
  }
  size_t got = 7;
  if (sf_next_batch(client, ids, 0, &got) != SF_INVALID_ARGUMENT || got != 0) {
    printf("n == 0 was accepted\n");
    return 1;
  }

  sf_decoded_id decoded;
  status = sf_decode(client, last, &decoded);
  if (status != SF_OK) return Fail("sf_decode", status);
  if (decoded.unix_ms < 1767225600000LL || decoded.machine > 1023 || decoded.sequence > 4095) {
    printf("decoded nonsense: %" PRId64 " %u %u\n", decoded.unix_ms, decoded.machine,
           decoded.sequence);
    return 1;
  }
  if (sf_decode(NULL, UINT64_C(1) << 63, &decoded) != SF_INVALID_ARGUMENT) {
    printf("a value with the sign bit decoded\n");
    return 1;
  }
  /* The IDs of the millisecond `last` was made in contain it, from C, with no daemon. */
  int64_t epoch = 0;
  status = sf_parse_time("2026-01-01T05:30:00+05:30", &epoch);
  if (status != SF_OK) return Fail("sf_parse_time", status);
  if (epoch != SF_DEFAULT_EPOCH_UNIX_MS) {
    printf("sf_parse_time gave %" PRId64 "\n", epoch);
    return 1;
  }
  sf_id_bounds bounds;
  status = sf_bounds(epoch, decoded.unix_ms, decoded.unix_ms, &bounds);
  if (status != SF_OK) return Fail("sf_bounds", status);
  if (bounds.first_id > last || bounds.last_id < last ||
      bounds.last_id - bounds.first_id + 1 != (UINT64_C(1) << 22)) {
    printf("sf_bounds: %" PRIu64 "..%" PRIu64 " misses %" PRIu64 "\n", bounds.first_id,
           bounds.last_id, last);
    return 1;
  }
  sf_close(client);
  sf_close(NULL);
  printf("ok %" PRIu64 " machine %u\n", last, decoded.machine);
  return 0;
}
