/* The Go package's one call the C ABI lacks: a status snapshot of a runtime directory's
 * segment (snowflake::Client::Inspect, C++), as a plain C struct. */

#ifndef SNOWFLAKE_GO_STATUS_SHIM_H_
#define SNOWFLAKE_GO_STATUS_SHIM_H_

#include <stdint.h>

#include "snowflake/snowflake.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfgo_status {
  char state[32];
  char health[32];
  char reason_code[64];
  char reason[256];
  int64_t reason_detail;
  uint32_t machine;
  int64_t epoch_unix_ms;
  uint64_t incarnation;
  uint64_t pid;
  uint64_t heartbeat_age_ns;
  uint64_t ring_fill;
  uint64_t ring_capacity;
  uint64_t fill_target;
  uint64_t published_total;
  uint64_t taken_total; /* taken minus drained, as `snowflakectl status --json` */
  uint64_t drained_total;
  uint64_t clock_pauses;
  uint64_t uncounted;
  uint64_t liveness_ms;
  uint64_t freshness_bound_ms;
} sfgo_status;

/* Fills *out from the segment in runtime_dir ("" or NULL: the default). Returns SF_OK or
 * an sf_status of sf_open's list; then *message is a malloc'ed text (free it). */
sf_status sfgo_inspect(const char *runtime_dir, sfgo_status *out, char **message);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SNOWFLAKE_GO_STATUS_SHIM_H_ */
