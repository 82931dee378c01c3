"""Unique, time-ordered 64-bit IDs from the local snowflaked, taken from its shared-memory ring.

    import snowflake
    with snowflake.Client("orders") as client:
        order_id = client.next()
        ids = client.next_batch(1000)        # array('Q'), no object per ID
    snowflake.decode(order_id).time          # datetime (UTC)

A Client wraps libsnowflake's C++ Client (docs/client.md): a take is a few loads and one
compare-and-swap on the ring, with no system call unless the ring is empty. Calls that may
wait release the GIL. One Client may be used by any number of threads. After fork() a child
may keep using its copy (parent and child get distinct IDs; the child's takes count under
the parent's service) or open its own Client.

Every error is a snowflake.Error subclass carrying the library's message (what happened and
what to do), its code ("daemon_paused", ...) and its C ABI status number.
"""

import datetime as _datetime
import json as _json
import os as _os
from typing import NamedTuple as _NamedTuple

from . import _snowflake

__all__ = [
    "Client", "Decoded", "Bounds", "decode", "bounds", "DEFAULT_EPOCH",
    "Error", "InvalidServiceNameError", "InvalidArgumentError", "TimeOutOfRangeError",
    "UnavailableError", "DaemonNotRunningError", "DaemonStartingError", "DaemonPausedError",
    "DaemonOutOfServiceError", "DaemonStoppedError", "DaemonNotHeartbeatingError",
    "DaemonDeadError", "TimedOutError", "RingEmptyError", "PermissionDeniedError",
    "IncompatibleVersionError", "CorruptSegmentError", "UntrustedSegmentError",
    "SystemFailureError",
]

_UTC = _datetime.timezone.utc
_UNIX_EPOCH = _datetime.datetime(1970, 1, 1, tzinfo=_UTC)


class Error(Exception):
    """Any error of libsnowflake. message: what happened and what to do; code: a stable name
    ("daemon_paused"); status: the C ABI's sf_status number; action: what a caller does
    about it, the same in every language (sf_status_action): "fail_over" (exactly the
    UnavailableError classes), "retry_here" (RingEmptyError), "fix_the_call" (the
    ValueError ones) or "fix_the_host"."""

    action = "fix_the_host"

    def __init__(self, message, code="system_error", status=15):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


class InvalidServiceNameError(Error, ValueError):
    """The service name is not 1-63 characters of [a-z0-9._-]. Fix the name."""

    action = "fix_the_call"


class InvalidArgumentError(Error, ValueError):
    """A bad argument (a batch size, a time, an ID, a closed client). Fix the call."""

    action = "fix_the_call"


class TimeOutOfRangeError(Error, ValueError):
    """bounds(): no ID of the epoch can carry a time of the range."""

    action = "fix_the_call"


class UnavailableError(Error):
    """This host's daemon cannot hand out IDs now; another daemon may: fail over (the
    subclass says why)."""

    action = "fail_over"


class DaemonNotRunningError(UnavailableError):
    """No segment in the runtime directory (the message names the path): start snowflaked."""


class DaemonStartingError(UnavailableError):
    """The daemon is starting: retry shortly."""


class DaemonPausedError(UnavailableError):
    """The daemon paused generation (the message has why); it resumes by itself."""


class DaemonOutOfServiceError(UnavailableError):
    """Out of service until an operator runs `snowflakectl resume`."""


class DaemonStoppedError(UnavailableError):
    """The daemon shut down cleanly."""


class DaemonNotHeartbeatingError(UnavailableError):
    """The daemon's heartbeat is too old (hung or stopped)."""


class DaemonDeadError(UnavailableError):
    """The daemon's process is gone: restart it."""


class TimedOutError(UnavailableError):
    """The ring held only IDs too old to hand out for the whole timeout (the daemon is not
    draining it), or the daemon did not hand over its consumer region in time."""


class RingEmptyError(Error):
    """The ring stayed empty for the whole timeout while the daemon looked healthy: it is
    alive and refilling (a hung daemon is DaemonNotHeartbeatingError by then). Retry here;
    not an UnavailableError, so a caller that fails over on those does not leave a healthy
    daemon for a ring that was briefly empty."""

    action = "retry_here"


class PermissionDeniedError(Error):
    """This user may not read the segment: join the group the message names."""


class IncompatibleVersionError(Error):
    """The daemon speaks another segment format version: use matching releases."""


class CorruptSegmentError(Error):
    """The segment fails validation: stop snowflaked, remove the file, restart it."""


class UntrustedSegmentError(Error):
    """The segment has the wrong owner, an open mode or is no regular file: refused."""


class SystemFailureError(Error):
    """An unexpected OS error or out of memory (the message names the cause)."""


# Keyed by the library's codes (sf_status_str, one table in protocol/vocabulary.h);
# tests/test_api.py checks every status has its class here.
_ERRORS = {
    "invalid_service_name": InvalidServiceNameError,
    "invalid_argument": InvalidArgumentError,
    "daemon_not_running": DaemonNotRunningError,
    "permission_denied": PermissionDeniedError,
    "incompatible_version": IncompatibleVersionError,
    "corrupt_segment": CorruptSegmentError,
    "untrusted_segment": UntrustedSegmentError,
    "daemon_starting": DaemonStartingError,
    "daemon_paused": DaemonPausedError,
    "daemon_out_of_service": DaemonOutOfServiceError,
    "daemon_stopped": DaemonStoppedError,
    "daemon_not_heartbeating": DaemonNotHeartbeatingError,
    "daemon_dead": DaemonDeadError,
    "timed_out": TimedOutError,
    "system_error": SystemFailureError,
    "time_out_of_range": TimeOutOfRangeError,
    "ring_empty": RingEmptyError,
}
_snowflake._register_errors(_ERRORS)


def _invalid(message):
    return InvalidArgumentError(message, "invalid_argument", 2)


def _datetime_of(unix_ms):
    return _UNIX_EPOCH + _datetime.timedelta(milliseconds=unix_ms)


def _unix_ms(value, what):
    """Unix milliseconds of an int (Unix ms), an aware datetime, or a text snowflakectl
    accepts (RFC 3339 with a time zone, or Unix ms)."""
    if isinstance(value, bool):
        raise _invalid(f"{what}: expected Unix milliseconds, a datetime or a time text, not a bool")
    if isinstance(value, int):
        return value
    if isinstance(value, _datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise _invalid(f"{what}: {value.isoformat()} has no time zone: give one "
                           "(e.g. tzinfo=datetime.timezone.utc)")
        return (value - _UNIX_EPOCH) // _datetime.timedelta(milliseconds=1)
    if isinstance(value, str):
        return _snowflake._parse_time(value)
    raise _invalid(f"{what}: expected Unix milliseconds (int), an aware datetime or a time "
                   f"text such as 2026-01-01T00:00:00Z, not {type(value).__name__}")


def _check_id(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"an ID is an int, not {type(value).__name__}")
    if not 0 <= value < 1 << 63:
        raise _invalid(f"{value} is no ID: IDs are between 0 and 2^63-1")
    return value


class Decoded(_NamedTuple):
    """The fields of an ID."""
    time: _datetime.datetime  # creation millisecond, UTC
    unix_ms: int
    machine: int              # below 2^machine bits of the layout
    sequence: int             # below 2^sequence bits of the layout


class Bounds(_NamedTuple):
    """The IDs of a time range, for `WHERE id BETWEEN first_id AND last_id`."""
    first_id: int
    last_id: int
    first: _datetime.datetime  # the range's start, raised to the epoch if earlier
    last: _datetime.datetime   # its end, lowered to the epoch's last millisecond if later


DEFAULT_EPOCH = _datetime_of(_snowflake.DEFAULT_EPOCH_UNIX_MS)


def _decoded(fields):
    unix_ms, machine, sequence = fields
    return Decoded(_datetime_of(unix_ms), unix_ms, machine, sequence)


def _layout(value):
    """The layout text for _snowflake: a preset name or "T/M/S" (None: "default")."""
    if value is None:
        return "default"
    if not isinstance(value, str):
        raise _invalid(f"layout: expected a preset name such as \"65536-hosts\" or bits such "
                       f"as \"41/16/6\", not {type(value).__name__}")
    return value


def decode(id, epoch=None, layout=None):
    """Splits an ID into its time, machine and sequence. epoch: the daemons' [id] epoch (int
    Unix ms, aware datetime or text); None: the default, 2026-01-01T00:00:00Z. layout: the
    daemons' [id] layout, a preset ("default", "8192-hosts", "65536-hosts") or
    time/machine/sequence bits ("41/16/6"); None: "default", 41/10/12."""
    epoch_ms = _snowflake.DEFAULT_EPOCH_UNIX_MS if epoch is None else _unix_ms(epoch, "epoch")
    return _decoded(_snowflake._decode(_check_id(id), epoch_ms, _layout(layout)))


def bounds(from_, to, epoch=None, layout=None):
    """The smallest and largest IDs any machine makes from `from_` to `to` (both included;
    int Unix ms, aware datetimes or texts), with the epoch and layout as decode() takes
    them. A range partly outside what the epoch's IDs carry is cut to it; one wholly
    outside raises TimeOutOfRangeError."""
    epoch_ms = _snowflake.DEFAULT_EPOCH_UNIX_MS if epoch is None else _unix_ms(epoch, "epoch")
    first_id, last_id, first_ms, last_ms = _snowflake._bounds(
        epoch_ms, _unix_ms(from_, "from"), _unix_ms(to, "to"), _layout(layout))
    return Bounds(first_id, last_id, _datetime_of(first_ms), _datetime_of(last_ms))


class Client(_snowflake._Client):
    """A client of the local daemon's ring for `service` (1-63 characters of [a-z0-9._-]).

    runtime_dir: the daemon's runtime directory (None: $SNOWFLAKE_RUNTIME_DIR, else
    /run/snowflaked). remotes: other daemons' HTTP fronts for failover, "host:port",
    "http://host:port" or "https://host:port" strings or one comma-separated string (None:
    $SNOWFLAKE_REMOTES; [] or "": none, whatever the environment says). timeout: seconds a
    take waits on an empty ring before RingEmptyError (None: 0.1). remotes_ca: the CA file
    (PEM) https:// remotes must verify against (None: $SNOWFLAKE_REMOTES_CA, else the
    system's CAs); remotes_cert and
    remotes_key: this client's certificate and key (PEM) for fronts with mutual TLS (None:
    $SNOWFLAKE_REMOTES_CERT and $SNOWFLAKE_REMOTES_KEY, else none). max_heartbeat_age:
    seconds the daemon's heartbeat may be old before a take says DaemonNotHeartbeatingError
    (None or 0: the daemon's own liveness setting, from its segment; 50 ms by default).
    """

    def __init__(self, service, runtime_dir=None, remotes=None, timeout=None,
                 remotes_ca=None, remotes_cert=None, remotes_key=None, max_heartbeat_age=None):
        if isinstance(remotes, str):
            remotes = [r for r in remotes.split(",") if r]
        elif remotes is not None:
            remotes = list(remotes)
        if isinstance(timeout, bool) or (timeout is not None and
                                         not isinstance(timeout, (int, float))):
            raise _invalid(f"timeout is seconds (a number), not {type(timeout).__name__}")
        if isinstance(max_heartbeat_age, bool) or (
                max_heartbeat_age is not None and not isinstance(max_heartbeat_age, (int, float))):
            raise _invalid("max_heartbeat_age is seconds (a number), not "
                           f"{type(max_heartbeat_age).__name__}")
        if runtime_dir is not None:
            runtime_dir = str(runtime_dir)
        if not isinstance(service, str):
            raise InvalidServiceNameError(
                f"the service name is a str, not {type(service).__name__}",
                "invalid_service_name", 1)
        tls_files = []
        for name, value in (("remotes_ca", remotes_ca), ("remotes_cert", remotes_cert),
                            ("remotes_key", remotes_key)):
            if value is not None and not isinstance(value, (str, _os.PathLike)):
                raise _invalid(f"{name} is a path, not {type(value).__name__}")
            tls_files.append(None if value is None else _os.fspath(value))
        super().__init__(service, runtime_dir, remotes, timeout, *tls_files, max_heartbeat_age)

    def status(self):
        """The object `snowflakectl status --json` prints for this client's runtime
        directory (docs/cli.md), plus client_taken: the IDs this Client took."""
        return _json.loads(self._status_json())

    def decode(self, id):
        """Like snowflake.decode, with the layout of this client's daemon (its segment's
        epoch and bits), never the default's."""
        return _decoded(self._decode(_check_id(id)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self.closed:
            return "<snowflake.Client closed>"
        return f"<snowflake.Client service={self.service!r}>"
