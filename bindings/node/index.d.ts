// TypeScript declarations of the `snowflaked` package (index.js).

/** The client's options. Every one may be left out. */
export interface ClientOptions {
  /** The daemon's runtime directory; default $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked. */
  runtimeDir?: string;
  /** Other daemons' HTTP fronts ("host:port", "http://…", "https://…"), an array or one
   * comma-separated string, used by nextAsync()/nextBatchAsync() while the local daemon
   * is not serving. Default $SNOWFLAKE_REMOTES; [] or "": none. The sync calls never
   * ask remotes. */
  remotes?: string | string[];
  /** The CA file (PEM) https:// remotes must verify against; default $SNOWFLAKE_REMOTES_CA. */
  remotesCa?: string;
  /** This client's certificate and key (PEM) for fronts with mutual TLS. */
  remotesCert?: string;
  remotesKey?: string;
  /** Heartbeat age limit in ms; 0 (default): the daemon's own liveness setting. */
  maxHeartbeatAgeMs?: number;
  /** How long a sync call waits on an empty ring, in ms; default 1 (it blocks the event
   * loop). A ring still empty then throws 'ring_empty', whose action is 'retry_here': the
   * daemon is alive and refilling, so take again (or use nextAsync()); no failover. */
  syncWaitMs?: number;
  /** How long an async call waits on an empty ring, in ms; default 100; then 'ring_empty'. */
  timeoutMs?: number;
}

/** An ID's fields. */
export interface Decoded {
  /** The creation millisecond. */
  time: Date;
  /** below 2^machine bits of the layout */
  machine: number;
  /** below 2^sequence bits of the layout */
  sequence: number;
}

/** The IDs of a time range, for `WHERE id BETWEEN firstId AND lastId`. */
export interface Bounds {
  firstId: bigint;
  lastId: bigint;
  /** The range's start, raised to the epoch if it began earlier. */
  first: Date;
  /** Its end, lowered to the epoch's last millisecond if later. */
  last: Date;
}

/** The daemon's answer on its control socket (docs/control-protocol.md, "Status keys"),
 * its keys in camelCase. */
export interface DaemonStatus {
  state: string;
  reasonCode: string;
  reason: string;
  pid: number;
  version: string;
  machine: number;
  epochUnixMs: number;
  ringCapacity: number;
  ringFill: number;
  publishedTotal: number;
  /** null before the daemon issued its first ID. */
  lastIssuedId: bigint | null;
  /** IDs taken per service since the daemon started. */
  services: Record<string, number>;
  fronts: Array<{ name: string; listen: string[]; connections: number; requests: number; refused: number }>;
  [key: string]: unknown;
}

/** The object `snowflakectl status --json` prints (docs/cli.md), keys in camelCase: the
 * segment's view, the daemon's answer under `daemon` (null with `daemonError` saying why
 * when its control socket did not answer), and `clientTaken`. */
export interface Status {
  ok: boolean;
  state: string;
  health: string;
  reasonCode: string;
  reason: string;
  machine: number;
  epochUnixMs: number;
  /** The bits of the daemon's IDs, time/machine/sequence ("41/10/12"): decode()'s layout. */
  layout: string;
  pid: number;
  ringFill: number;
  ringCapacity: number;
  publishedTotal: number;
  takenTotal: number;
  heartbeatAgeNs: number;
  runtimeDir: string;
  lastIssuedId: bigint | null;
  daemonReachable: boolean;
  daemonError: string | null;
  daemon: DaemonStatus | null;
  /** IDs this client took. */
  clientTaken: number;
  [key: string]: unknown;
}

/** A client of one service. Sync calls wait on an empty ring at most syncWaitMs; a paused,
 * stopped or dead daemon fails them at once (SnowflakeError with the daemon's code). */
export declare class Client {
  private constructor();
  /** One ID. */
  next(): bigint;
  /** One ID as its decimal text. */
  nextString(): string;
  /** 1 to n strictly increasing IDs: what the ring holds now (fewer than n is no error;
   * call again). n: 1 to 2^24. */
  nextBatch(n: number): BigUint64Array;
  /**
   * nextBatch() into `into` from its index 0 (pass a subarray for an offset), allocating
   * nothing: 1 to into.length IDs; returns how many. into.length: 1 to 2^24.
   */
  nextBatchInto(into: BigUint64Array): number;
  /** One ID, waiting on a worker thread up to timeoutMs, failing over to the remotes. */
  nextAsync(): Promise<bigint>;
  /** n strictly increasing IDs, waiting on a worker thread up to timeoutMs per refill; the
   * 1 to n-1 already taken if a later take fails (the next call meets the error). */
  nextBatchAsync(n: number): Promise<BigUint64Array>;
  /** The status `snowflakectl status --json` prints, plus clientTaken; rejects only when
   * the segment cannot be read (no local daemon, remotes only) or the client is closed. */
  status(): Promise<Status>;
  /** Like decode(), with the layout of this client's daemon: its epoch and bits. */
  decode(id: bigint | string): Decoded;
  /** Idempotent and immediate; async calls already in flight still finish (they hold the
   * native client until then). Any later call fails with 'invalid_argument'. */
  close(): void;
  readonly closed: boolean;
  readonly service: string;
}

/** What a caller does about an error, the same in every language (sf_status_action). */
export type ErrorAction = 'fail_over' | 'retry_here' | 'fix_the_call' | 'fix_the_host';

/** The library's error codes (ERROR_CODES, the C ABI's sf_status_str), each with its
 * action in ERROR_ACTIONS: 'fail_over' from 'daemon_not_running' to 'timed_out',
 * 'retry_here' for 'ring_empty' (the ring stayed empty while the daemon looked healthy),
 * 'fix_the_call' or 'fix_the_host' for the others. */
export type ErrorCode =
  | 'invalid_service_name' | 'invalid_argument' | 'daemon_not_running' | 'permission_denied'
  | 'incompatible_version' | 'corrupt_segment' | 'untrusted_segment' | 'daemon_starting'
  | 'daemon_paused' | 'daemon_out_of_service' | 'daemon_stopped' | 'daemon_not_heartbeating'
  | 'daemon_dead' | 'timed_out' | 'system_error' | 'time_out_of_range' | 'ring_empty';

/** Every error of the library. code: 'daemon_paused', 'ring_empty', … (ERROR_CODES; a
 * newer library's code is any string); action: 'fail_over' for exactly the codes to fail
 * over on, 'retry_here' for 'ring_empty' (ERROR_ACTIONS). */
export declare class SnowflakeError extends Error {
  constructor(message: string, code: string);
  readonly code: ErrorCode | (string & {});
  readonly action: ErrorAction;
}

/** Opens the local daemon's ring for `service` (1-63 characters of [a-z0-9._-]). */
export declare function open(service: string, options?: ClientOptions): Client;
/** open() on a worker thread, so the event loop never waits for it (a refusal's message
 * looks the segment's group up, which NSS may answer from the network). A bad argument
 * throws at once; the open's own error rejects. */
export declare function openAsync(service: string, options?: ClientOptions): Promise<Client>;
/** The daemons' [id] layout: a preset or time/machine/sequence bits such as "41/16/6". */
export type Layout = 'default' | '8192-hosts' | '65536-hosts' | (string & {});
/** An ID's fields; epoch: the daemons' [id] epoch (default 2026-01-01T00:00:00Z); layout:
 * their [id] layout (default 'default', 41/10/12). */
export declare function decode(id: bigint | string, epoch?: Date | number | string,
                               layout?: Layout): Decoded;
/** The IDs any machine makes from `from` to `to`, both included, with the epoch and layout
 * as decode() takes them. */
export declare function bounds(from: Date | number | string, to: Date | number | string,
                               epoch?: Date | number | string, layout?: Layout): Bounds;
export declare const DEFAULT_EPOCH: Date;
export declare const ERROR_CODES: readonly ErrorCode[];
export declare const ERROR_ACTIONS: Readonly<Record<ErrorCode, ErrorAction>>;
