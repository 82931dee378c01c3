/* libsnowflake's C ABI: the same semantics as snowflake/client.h, for C and for any
 * language's foreign-function interface. Plain C99/C11; no C++ types cross it and no
 * exception escapes it.
 *
 *   sf_client *c;
 *   if (sf_open("orders", NULL, &c) != SF_OK) { fprintf(stderr, "%s\n", sf_last_error()); }
 *   uint64_t id; if (sf_next(c, &id) == SF_OK) { ... }   sf_close(c);
 *
 * Thread safety: an sf_client may be used by any number of threads at once without
 * external synchronization; sf_next and sf_next_batch are lock-free and make no system
 * call unless the ring is empty. sf_close must not race with other calls on the same
 * client. sf_last_error is per thread. */

#ifndef SNOWFLAKE_SNOWFLAKE_H_
#define SNOWFLAKE_SNOWFLAKE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every call returns one of these. Values are part of the ABI and never change. */
typedef enum sf_status {
  SF_OK = 0,
  /* The service name is not 1-63 characters of [a-z0-9._-]. Fix the name. */
  SF_INVALID_SERVICE_NAME = 1,
  /* A null pointer, n == 0, or an sf_options with a bad struct_size. Fix the call. */
  SF_INVALID_ARGUMENT = 2,
  /* No segment in the runtime directory (the message names the path): start snowflaked
   * or set SNOWFLAKE_RUNTIME_DIR / sf_options.runtime_dir. */
  SF_DAEMON_NOT_RUNNING = 3,
  /* This user may not read the segment: join the group the message names. */
  SF_PERMISSION_DENIED = 4,
  /* The daemon speaks another segment format version: use matching releases. */
  SF_INCOMPATIBLE_VERSION = 5,
  /* The segment fails validation: stop snowflaked, remove the file, restart it. */
  SF_CORRUPT_SEGMENT = 6,
  /* The segment has the wrong owner, an open mode or is not a regular file: refused. */
  SF_UNTRUSTED_SEGMENT = 7,
  /* The daemon is starting: retry shortly. */
  SF_DAEMON_STARTING = 8,
  /* The daemon paused generation (the message has why): fail over; it resumes itself. */
  SF_DAEMON_PAUSED = 9,
  /* Out of service until an operator runs `snowflakectl resume`: fail over. */
  SF_DAEMON_OUT_OF_SERVICE = 10,
  /* The daemon shut down cleanly: fail over, retry later. */
  SF_DAEMON_STOPPED = 11,
  /* The daemon's heartbeat is too old (hung or stopped): fail over. */
  SF_DAEMON_NOT_HEARTBEATING = 12,
  /* The daemon's process is gone: fail over and restart it. */
  SF_DAEMON_DEAD = 13,
  /* The ring held only IDs older than its freshness bound for the whole wait while the
   * daemon looked healthy (it is not draining its ring), or the daemon did not hand over
   * its consumer region in time: fail over. */
  SF_TIMED_OUT = 14,
  /* An unexpected OS error or out of memory (the message names the cause). */
  SF_SYSTEM_ERROR = 15,
  /* sf_bounds: no ID of the epoch can carry a time of the range (it lies wholly before
   * the epoch, or after the range of the layout's time bits). */
  SF_TIME_OUT_OF_RANGE = 16,
  /* The ring stayed empty for the whole wait (sf_options.wait_timeout_ms) while the
   * daemon looked healthy: it is alive and refilling (a hung daemon is
   * SF_DAEMON_NOT_HEARTBEATING by then). Retry here, not on another daemon. (Libraries
   * before this value said SF_TIMED_OUT, a failover, for it.) */
  SF_RING_EMPTY = 17
} sf_status;

/* Options for sf_open. Initialise with sf_options_init (or SF_OPTIONS_INIT) and then set
 * fields, so a program built against an older header keeps working with a newer library:
 * the library reads only the first struct_size bytes. struct_size must end at a field
 * boundary (8, 16, 20, 24, 32, 40, 48 or 56 here); a larger one (at most 256) is accepted
 * only if every byte past this struct is zero; reserved must be 0. Otherwise sf_open
 * returns SF_INVALID_ARGUMENT. */
typedef struct sf_options {
  uint32_t struct_size;          /* sizeof(sf_options) of the caller's header */
  uint32_t wait_timeout_ms;      /* wait on an empty ring; default 100 */
  const char *runtime_dir;       /* NULL: $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked;
                                  * copied by sf_open */
  uint32_t max_heartbeat_age_ms; /* heartbeat age limit; 0 (default): the daemon's
                                    daemon.liveness_ms from the segment header */
  uint32_t reserved;             /* must be 0 */
  /* Failover (docs/client.md): other daemons' HTTP fronts, "host:port,host:port", used
   * while the local daemon is not serving. NULL: $SNOWFLAKE_REMOTES, else none; "": none,
   * whatever the environment says. Copied by sf_open. Added in 0.2; older callers'
   * struct_size stops before it. */
  const char *remotes;
  /* TLS for https:// remotes (docs/client.md, "Remotes over TLS"): the CA file (PEM) the
   * remotes' certificates must verify against (NULL: $SNOWFLAKE_REMOTES_CA, else the
   * system's CAs), and this client's certificate and key (PEM) for fronts with mutual
   * TLS (NULL: $SNOWFLAKE_REMOTES_CERT and $SNOWFLAKE_REMOTES_KEY, else none; both or
   * neither). Copied by sf_open. Added in 0.3; older callers' struct_size stops before. */
  const char *remotes_ca;
  const char *remotes_cert;
  const char *remotes_key;
} sf_options;

#define SF_OPTIONS_INIT \
  { sizeof(sf_options), 100u, NULL, 0u, 0u, NULL, NULL, NULL, NULL }

/* Fills *opts with the defaults (and struct_size). */
void sf_options_init(sf_options *opts);

/* An open client. Opaque; created by sf_open, destroyed by sf_close. */
typedef struct sf_client sf_client;

/* Opens the local daemon's ring for `service` (copied). opts may be NULL (defaults).
 * On SF_OK *out owns a client to pass to sf_close; otherwise *out is set to NULL.
 * Returns SF_OK, SF_INVALID_SERVICE_NAME, SF_INVALID_ARGUMENT, SF_DAEMON_NOT_RUNNING,
 * SF_PERMISSION_DENIED, SF_INCOMPATIBLE_VERSION, SF_CORRUPT_SEGMENT,
 * SF_UNTRUSTED_SEGMENT or SF_SYSTEM_ERROR. A stopped or paused daemon is reported by
 * sf_next, not here. With remotes (sf_options.remotes or $SNOWFLAKE_REMOTES) no local
 * daemon at all (no segment, no runtime dir) is not an error: the client takes from the
 * remotes, with the default epoch, and maps a local segment once one appears. */
sf_status sf_open(const char *service, const sf_options *opts, sf_client **out);

/* Takes one ID into *id: larger than any ID a take completed before this call began
 * received, on this host. Returns SF_OK, SF_INVALID_ARGUMENT, SF_DAEMON_STARTING,
 * SF_DAEMON_PAUSED, SF_DAEMON_OUT_OF_SERVICE, SF_DAEMON_STOPPED,
 * SF_DAEMON_NOT_HEARTBEATING, SF_DAEMON_DEAD (each within about a millisecond of finding
 * the ring empty), SF_RING_EMPTY (empty for the whole wait: retry) or SF_TIMED_OUT (only
 * IDs too old to hand out for the whole wait). *id is written only on SF_OK. */
sf_status sf_next(sf_client *c, uint64_t *id);

/* Takes up to n strictly increasing IDs into ids[0..*got) in one step. On SF_OK,
 * 1 <= *got <= n; *got < n means the ring held only *got IDs at that instant (not an
 * error: call again for more). It never succeeds with 0 IDs: on an empty ring it waits
 * and fails like sf_next. n == 0 is SF_INVALID_ARGUMENT. On error *got is 0. */
sf_status sf_next_batch(sf_client *c, uint64_t *ids, size_t n, size_t *got);

/* Closes the client (retiring its counter slot) and frees it. NULL is ignored. */
void sf_close(sf_client *c);

/* The fields of an ID. */
typedef struct sf_decoded_id {
  int64_t unix_ms;   /* creation millisecond, Unix time */
  uint32_t machine;  /* below 2^machine bits of the layout */
  uint32_t sequence; /* below 2^sequence bits of the layout */
} sf_decoded_id;

/* Splits id using c's segment layout (its epoch and bits, from the segment header), or the
 * default layout (2026-01-01T00:00:00Z, 41/10/12) when c is NULL or has no daemon yet (a
 * given epoch and layout: sf_decode_in, below). Returns
 * SF_OK, or SF_INVALID_ARGUMENT (out is NULL, or id has the sign bit set and is no ID). */
sf_status sf_decode(const sf_client *c, uint64_t id, sf_decoded_id *out);

/* The platform's default epoch, 2026-01-01T00:00:00Z, in Unix milliseconds. */
#define SF_DEFAULT_EPOCH_UNIX_MS INT64_C(1767225600000)

/* Parses a time the way snowflaked's config ([id] epoch) and snowflakectl do: Unix
 * milliseconds ("1767225600000", "-5") or an RFC 3339 date-time with a time zone
 * ("2026-01-01T00:00:00Z", "2026-01-01T05:30:00.250+05:30"; a finer fraction than ms is
 * cut). Returns SF_OK with *unix_ms set, or SF_INVALID_ARGUMENT (a NULL argument, or text
 * that is no such time: sf_last_error says what is wrong). Needs no daemon. */
sf_status sf_parse_time(const char *text, int64_t *unix_ms);

/* The IDs of a time range, for `WHERE id BETWEEN first_id AND last_id`. */
typedef struct sf_id_bounds {
  uint64_t first_id;     /* the smallest ID any machine can make at first_unix_ms */
  uint64_t last_id;      /* the largest ID any machine can make at last_unix_ms */
  int64_t first_unix_ms; /* the range's start, raised to the epoch if it began earlier */
  int64_t last_unix_ms;  /* its end, lowered to the epoch's last millisecond if later */
} sf_id_bounds;

/* The smallest and largest IDs any machine can make in the default bits (41/10/12; another
 * layout's: sf_bounds_in) with the epoch epoch_unix_ms (SF_DEFAULT_EPOCH_UNIX_MS by default), at
 * the milliseconds from from_unix_ms to to_unix_ms, both included. A range reaching outside what
 * IDs of the epoch can carry is cut to it (*out says where). Returns SF_OK, SF_INVALID_ARGUMENT
 * (out is NULL, the epoch is negative or too late, or from_unix_ms > to_unix_ms) or
 * SF_TIME_OUT_OF_RANGE (the whole range is before the epoch or after its last millisecond). *out is
 * written only on SF_OK. Needs no daemon. */
sf_status sf_bounds(int64_t epoch_unix_ms, int64_t from_unix_ms, int64_t to_unix_ms,
                       sf_id_bounds *out);

/* An ID layout's bits (docs/id-layout.md): how the 63 bits below the sign bit split into
 * the milliseconds since the epoch (time, the highest), the machine number and the
 * sequence within the millisecond (the lowest). A layout fills all 63 bits with time
 * 40-44, machine 1-16 and sequence 6 or more; the default is 41/10/12. A platform chooses
 * it once, with its epoch ([id] layout in snowflaked's config). */
typedef struct sf_id_bits {
  int32_t time;     /* bits of milliseconds since the epoch: 2^time ms of IDs */
  int32_t machine;  /* bits of the machine number: 2^machine hosts */
  int32_t sequence; /* bits of the sequence: 2^sequence IDs per ms per host */
} sf_id_bits;

/* Parses a layout the way snowflaked's config ([id] layout) and snowflakectl --layout do: a
 * preset ("default", "8192-hosts", "65536-hosts") or time/machine/sequence bits ("41/16/6",
 * "time41-machine16-sequence6"). Returns SF_OK with *out set, or SF_INVALID_ARGUMENT (a NULL
 * argument, or text that is no layout: sf_last_error says which rule it breaks, what each
 * choice gives, with years counted from the default epoch, and the presets) or
 * SF_SYSTEM_ERROR (out of memory). *out is written only on SF_OK. Needs no daemon. */
sf_status sf_parse_layout(const char *text, sf_id_bits *out);

/* sf_decode with a layout given rather than a client's: splits id by the bits *bits and the
 * epoch epoch_unix_ms, the daemons' [id] layout and [id] epoch (sf_parse_layout,
 * sf_parse_time). Returns SF_OK, or SF_INVALID_ARGUMENT (bits or out is NULL, *bits is no
 * layout, the epoch is negative or so late that its range overflows, or id has the sign
 * bit set and is no ID; sf_last_error says which). *out is written only on SF_OK. Needs no
 * daemon. */
sf_status sf_decode_in(const sf_id_bits *bits, int64_t epoch_unix_ms, uint64_t id,
                       sf_decoded_id *out);

/* sf_bounds in the bits *bits rather than the default's: the smallest and largest IDs any
 * machine can make with them and the epoch epoch_unix_ms at the milliseconds from
 * from_unix_ms to to_unix_ms, both included, cut to what the epoch's IDs can carry (*out
 * says where). Returns SF_OK, SF_INVALID_ARGUMENT (bits or out is NULL, *bits is no layout,
 * the epoch is negative or too late, or from_unix_ms > to_unix_ms) or SF_TIME_OUT_OF_RANGE
 * (the whole range is before the epoch or after its last millisecond). *out is written
 * only on SF_OK. Needs no daemon. */
sf_status sf_bounds_in(const sf_id_bits *bits, int64_t epoch_unix_ms, int64_t from_unix_ms,
                       int64_t to_unix_ms, sf_id_bounds *out);

/* A stable name for a status ("ok", "daemon_paused", ...). Never NULL; static storage. */
const char *sf_status_str(sf_status s);

/* What a caller does about a status: the one failover rule, the same in every language
 * (docs/client.md, "What to do about an error"). Values are part of the ABI. */
typedef enum sf_action {
  SF_ACTION_NONE = 0, /* SF_OK */
  /* This host's daemon cannot serve now (not running, starting, paused, out of service,
   * stopped, not heartbeating, dead, or its ring holds only IDs too old to hand out):
   * another daemon may. */
  SF_ACTION_FAIL_OVER = 1,
  /* This source serves again shortly: retry it (SF_RING_EMPTY; the HTTP front's
   * throttled too). */
  SF_ACTION_RETRY_HERE = 2,
  /* The call is wrong (a bad name, argument or time range): fix it. */
  SF_ACTION_FIX_THE_CALL = 3,
  /* This host's setup (permissions, versions, the segment, the OS): fix the host; another
   * daemon is not tried for it. */
  SF_ACTION_FIX_THE_HOST = 4
} sf_action;

/* The action for `s`: SF_ACTION_NONE for SF_OK, SF_ACTION_FIX_THE_HOST for a value this
 * library does not know. Needs no daemon. */
sf_action sf_status_action(sf_status s);

/* A stable name for an action ("none", "fail_over", "retry_here", "fix_the_call",
 * "fix_the_host"; "unknown" for another value). Never NULL; static storage. */
const char *sf_action_str(sf_action a);

/* The message of the last call on this thread that did not return SF_OK: what happened
 * and what to do; "" if there was none. Successful calls leave it alone. The pointer
 * stays valid until the next failing call on this thread. */
const char *sf_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SNOWFLAKE_SNOWFLAKE_H_ */
