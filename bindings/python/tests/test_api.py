"""Every call of the snowflake module and every error path reachable from outside the
library, against a real snowflaked."""

import array
import datetime
import json
import os
import signal
import subprocess
import threading
import time

import pytest

import snowflake

UTC = datetime.timezone.utc
ID_LIMIT = 1 << 63


def test_next_returns_increasing_ids_of_now(daemon):
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        before = time.time_ns() // 1_000_000
        ids = [client.next() for _ in range(1000)]
        after = time.time_ns() // 1_000_000
    assert all(isinstance(i, int) and 0 < i < ID_LIMIT for i in ids)
    assert ids == sorted(set(ids))
    fields = snowflake.decode(ids[-1])
    # Ring IDs are made ahead of the take, at most the freshness bound (seconds) earlier.
    assert before - 10_000 <= fields.unix_ms <= after + 1000
    assert fields.time == datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(
        milliseconds=fields.unix_ms)


def test_next_batch_returns_an_array_of_increasing_ids(daemon):
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        first = client.next()
        batch = client.next_batch(5000)
        last = client.next()
    assert isinstance(batch, array.array) and batch.typecode == "Q"
    assert len(batch) == 5000
    assert all(a < b for a, b in zip(batch, batch[1:]))
    assert first < batch[0] and batch[-1] < last


@pytest.mark.parametrize("n", [0, -1, (1 << 24) + 1])
def test_next_batch_refuses_a_bad_size(daemon, n):
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        with pytest.raises(snowflake.InvalidArgumentError) as e:
            client.next_batch(n)
    assert e.value.code == "invalid_argument" and e.value.status == 2
    assert "between 1 and" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_status_has_the_keys_of_snowflakectl_status_json(daemon):
    ctl = os.environ.get("SNOWFLAKECTL")
    assert ctl, "SNOWFLAKECTL must name the snowflakectl binary (ctest sets it)"
    cli = subprocess.run([ctl, "status", "--json", "--runtime-dir", daemon.runtime_dir],
                         capture_output=True, text=True, timeout=30)
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        client.next_batch(10)
        client.next()
        status = client.status()
    assert set(status) == set(expected) | {"client_taken"}
    assert status["client_taken"] == 11
    assert status["state"] == "serving" and status["health"] == "serving"
    assert status["ok"] is True and status["daemon_reachable"] is True
    assert status["runtime_dir"] == daemon.runtime_dir
    assert status["machine"] == expected["machine"]
    assert status["epoch_unix_ms"] == snowflake.DEFAULT_EPOCH.timestamp() * 1000
    assert status["layout"] == "41/10/12"


def test_client_decode_uses_the_daemon_epoch(daemon):
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        value = client.next()
        assert client.decode(value) == snowflake.decode(value)
        assert client.epoch_unix_ms == int(snowflake.DEFAULT_EPOCH.timestamp() * 1000)
        assert client.service == "orders"
        assert client.decode(value).machine == client.status()["machine"]


def test_close_is_idempotent_and_later_calls_raise(daemon):
    client = snowflake.Client("orders", runtime_dir=daemon.runtime_dir)
    assert not client.closed and "orders" in repr(client)
    client.close()
    client.close()
    assert client.closed and "closed" in repr(client)
    for call in (client.next, lambda: client.next_batch(3), client.status,
                 lambda: client.decode(1)):
        with pytest.raises(snowflake.InvalidArgumentError, match="closed"):
            call()


def test_context_manager_closes_on_an_exception(daemon):
    with pytest.raises(KeyError):
        with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
            raise KeyError("x")
    assert client.closed


def test_threads_share_one_client(daemon):
    ids = [[] for _ in range(4)]
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir, timeout=5) as client:
        def take(mine):
            for i in range(2000):
                if i % 2:
                    mine.append(client.next())
                else:
                    mine.extend(client.next_batch(7))
        threads = [threading.Thread(target=take, args=(ids[t],)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert client.status()["client_taken"] == 4 * 1000 * 8
    every = [i for mine in ids for i in mine]
    assert len(every) == len(set(every)) == 4 * 1000 * 8
    assert all(mine == sorted(mine) for mine in ids)


def test_a_forked_child_takes_distinct_ids_with_the_parent_client(daemon):
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.write(write_end, client.next_batch(1000).tobytes())
            finally:
                os._exit(0)
        os.close(write_end)
        mine = client.next_batch(1000)
        data = b""
        while len(data) < 8000:
            chunk = os.read(read_end, 8000 - len(data))
            if not chunk:
                break
            data += chunk
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    child = array.array("Q", data)
    assert status == 0 and len(child) == 1000
    assert not set(child) & set(mine)


def test_the_gil_is_released_while_a_take_waits(daemon):
    # With the daemon stopped by SIGSTOP, a take waits until the heartbeat is too old;
    # meanwhile another Python thread must keep running.
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir, timeout=30) as client:
        ticks = [0]
        done = threading.Event()

        def count():
            while not done.is_set():
                ticks[0] += 1

        daemon.signal(signal.SIGSTOP)
        try:
            counter = threading.Thread(target=count)
            counter.start()
            with pytest.raises(snowflake.UnavailableError) as e:
                for _ in range(100_000_000):
                    client.next_batch(1 << 16)
            done.set()
            counter.join(10)
        finally:
            daemon.signal(signal.SIGCONT)
    assert e.value.code in ("daemon_not_heartbeating", "timed_out")
    assert ticks[0] > 1000
    daemon.wait_serving()


def test_max_heartbeat_age_is_the_limit_a_frozen_daemon_is_judged_by(daemon):
    # A daemon frozen by SIGSTOP stops beating. Under a 60 s limit its drained ring is only
    # empty (ring_empty: retry here); under a 0.2 s limit, once the patient client has waited
    # 0.3 s, the same daemon has stopped beating (fail over).
    options = {"runtime_dir": daemon.runtime_dir, "timeout": 0.3}
    with snowflake.Client("orders", max_heartbeat_age=60, **options) as patient, \
            snowflake.Client("orders", max_heartbeat_age=0.2, **options) as strict:
        daemon.signal(signal.SIGSTOP)
        try:
            with pytest.raises(snowflake.Error) as waited:
                for _ in range(1000):
                    patient.next_batch(1 << 16)
            with pytest.raises(snowflake.Error) as judged:
                strict.next()
        finally:
            daemon.signal(signal.SIGCONT)
    assert waited.value.code == "ring_empty", waited.value.message
    assert isinstance(waited.value, snowflake.RingEmptyError)
    assert judged.value.code == "daemon_not_heartbeating", judged.value.message
    assert isinstance(judged.value, snowflake.UnavailableError)
    daemon.wait_serving()


def test_module_decode_splits_an_id():
    fields = snowflake.decode(1 << 22 | 5 << 12 | 7)
    assert fields == snowflake.Decoded(
        snowflake.DEFAULT_EPOCH + datetime.timedelta(milliseconds=1),
        int(snowflake.DEFAULT_EPOCH.timestamp() * 1000) + 1, 5, 7)
    assert fields.time.tzinfo is not None
    assert snowflake.decode(0).time == datetime.datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("epoch", [0, "1970-01-01T00:00:00Z", "0",
                                   datetime.datetime(1970, 1, 1, tzinfo=UTC)])
def test_module_decode_takes_an_epoch_in_every_form(epoch):
    assert snowflake.decode(2 << 22, epoch).time == datetime.datetime(
        1970, 1, 1, 0, 0, 0, 2000, tzinfo=UTC)


@pytest.mark.parametrize("bad", [-1, 1 << 63, 1 << 64, "12", 1.5, True])
def test_module_decode_refuses_what_is_no_id(bad):
    with pytest.raises(snowflake.InvalidArgumentError):
        snowflake.decode(bad)


def test_module_decode_refuses_a_naive_or_bad_epoch():
    with pytest.raises(snowflake.InvalidArgumentError, match="time zone"):
        snowflake.decode(1, datetime.datetime(2026, 1, 1))
    with pytest.raises(snowflake.InvalidArgumentError) as e:
        snowflake.decode(1, "yesterday")
    assert e.value.message
    with pytest.raises(snowflake.InvalidArgumentError, match="epoch out of range"):
        snowflake.decode(1, -5)
    with pytest.raises(snowflake.InvalidArgumentError):
        snowflake.decode(1, 3.5)


def test_module_bounds_gives_the_ids_of_a_range():
    start = datetime.datetime(2026, 3, 1, tzinfo=UTC)
    b = snowflake.bounds(start, "2026-03-01T00:00:00.999Z")
    assert b.first == start and b.last == start + datetime.timedelta(milliseconds=999)
    assert snowflake.decode(b.first_id).time == start
    assert snowflake.decode(b.first_id).machine == 0 and snowflake.decode(b.first_id).sequence == 0
    last = snowflake.decode(b.last_id)
    assert (last.time, last.machine, last.sequence) == (b.last, 1023, 4095)
    cut = snowflake.bounds(0, snowflake.DEFAULT_EPOCH)
    assert cut.first == snowflake.DEFAULT_EPOCH and cut.first_id == 0


def test_module_bounds_refuses_bad_ranges():
    with pytest.raises(snowflake.InvalidArgumentError) as e:
        snowflake.bounds("2026-03-02T00:00:00Z", "2026-03-01T00:00:00Z")
    assert e.value.code == "invalid_argument"
    with pytest.raises(snowflake.TimeOutOfRangeError) as e:
        snowflake.bounds(0, 1000)
    assert e.value.code == "time_out_of_range" and e.value.status == 16
    with pytest.raises(snowflake.InvalidArgumentError):
        snowflake.bounds(None, 5)


# 41/16/6 (65536-hosts): 16 machine bits, 6 sequence bits; the time bits start at bit 22 as
# in the default, so only the machine and sequence move.
WIDE_ID = 1 << 22 | 65535 << 6 | 63


@pytest.mark.parametrize("layout", ["65536-hosts", "41/16/6", "time41-machine16-sequence6"])
def test_module_decode_splits_by_the_layout_given(layout):
    fields = snowflake.decode(WIDE_ID, layout=layout)
    assert (fields.unix_ms, fields.machine, fields.sequence) == (
        snowflake._snowflake.DEFAULT_EPOCH_UNIX_MS + 1, 65535, 63)
    assert snowflake.decode(WIDE_ID, 0, "8192-hosts")[1:] == (1, (1 << 13) - 1, 511)
    assert snowflake.decode(WIDE_ID) == snowflake.decode(WIDE_ID, layout="default")
    assert snowflake.decode(WIDE_ID).machine != 65535, "the default bits split it elsewhere"


def test_module_bounds_follow_the_layout_given():
    start = datetime.datetime(2026, 3, 1, tzinfo=UTC)
    b = snowflake.bounds(start, start, layout="41/16/6")
    last = snowflake.decode(b.last_id, layout="41/16/6")
    assert (last.time, last.machine, last.sequence) == (start, 65535, 63)
    assert b.first_id == snowflake.bounds(start, start).first_id, "the same 41 time bits"
    assert b.last_id == snowflake.bounds(start, start).last_id, "the same 22 bits below them"
    longer = snowflake.bounds(0, 1 << 62, 0, "44/1/18")
    assert longer.last == datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(
        milliseconds=(1 << 44) - 1), "44 time bits reach 557 years"
    assert longer.last_id == (1 << 63) - 1


@pytest.mark.parametrize("call", [lambda layout: snowflake.decode(1, layout=layout),
                                  lambda layout: snowflake.bounds(0, 1, 0, layout)])
def test_module_decode_and_bounds_refuse_a_bad_layout_saying_why(call):
    with pytest.raises(snowflake.InvalidArgumentError) as e:
        call("41/17/6")
    assert e.value.code == "invalid_argument"
    assert 'layout "41/17/6" is not a layout' in e.value.message
    assert "= 64 bits, not 63" in e.value.message and '"65536-hosts" = 41/16/6' in e.value.message
    with pytest.raises(snowflake.InvalidArgumentError, match="neither a preset"):
        call("many-hosts")
    with pytest.raises(snowflake.InvalidArgumentError, match="expected a preset name"):
        call(41)


@pytest.mark.parametrize("name", ["", "Orders", "a b", "x" * 64])
def test_open_refuses_a_bad_service_name(daemon, name):
    with pytest.raises(snowflake.InvalidServiceNameError) as e:
        snowflake.Client(name, runtime_dir=daemon.runtime_dir)
    assert e.value.code == "invalid_service_name" and e.value.status == 1
    assert isinstance(e.value, ValueError) and e.value.message == str(e.value)


def test_open_refuses_bad_options(daemon):
    for kwargs in ({"timeout": -1}, {"timeout": float("nan")}, {"timeout": "1"},
                   {"runtime_dir": ""}, {"max_heartbeat_age": -1},
                   {"max_heartbeat_age": float("nan")}, {"max_heartbeat_age": 3601},
                   {"max_heartbeat_age": "1"}, {"max_heartbeat_age": True}):
        with pytest.raises(snowflake.InvalidArgumentError):
            snowflake.Client("orders", **{"runtime_dir": daemon.runtime_dir, **kwargs})


def test_the_harness_reports_a_daemon_that_exits_before_ready_with_its_output(fresh_daemon):
    missing = os.path.join(fresh_daemon.root, "missing.toml")
    fresh_daemon.start(args=["--config", missing])
    with pytest.raises(pytest.fail.Exception) as e:
        fresh_daemon.wait_ready()
    assert "snowflaked exited with 2 before READY=1" in str(e.value)
    assert missing in str(e.value), "the daemon's own words are in the failure"


def test_the_harness_reports_a_daemon_that_sends_no_ready_with_its_output(fresh_daemon):
    # NOTIFY_SOCKET where nobody listens: the daemon serves, and its READY=1 is lost.
    fresh_daemon.start(env={"NOTIFY_SOCKET": os.path.join(fresh_daemon.root, "nobody")})
    with pytest.raises(pytest.fail.Exception) as e:
        fresh_daemon.wait_ready(timeout=2)
    assert "running) sent no READY=1 within 2 s" in str(e.value)
    assert "its output:" in str(e.value)


def test_open_without_a_daemon_names_the_path(fresh_daemon):
    os.makedirs(fresh_daemon.runtime_dir)
    with pytest.raises(snowflake.DaemonNotRunningError) as e:
        snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir)
    assert fresh_daemon.runtime_dir in e.value.message
    assert isinstance(e.value, snowflake.UnavailableError)
    assert e.value.code == "daemon_not_running" and e.value.status == 3


def test_open_with_remotes_and_no_daemon_fails_on_take(fresh_daemon):
    os.makedirs(fresh_daemon.runtime_dir)
    with snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir,
                          remotes="127.0.0.1:1") as client:
        with pytest.raises(snowflake.UnavailableError):
            client.next()


def test_empty_remotes_ignore_the_environment(fresh_daemon, monkeypatch):
    # remotes=None reads $SNOWFLAKE_REMOTES (a client with remotes opens without a local
    # daemon); remotes=[] or "" means none: the open fails as with no remotes at all.
    os.makedirs(fresh_daemon.runtime_dir)
    monkeypatch.setenv("SNOWFLAKE_REMOTES", "127.0.0.1:9")
    snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir).close()
    for none in ([], ""):
        with pytest.raises(snowflake.DaemonNotRunningError):
            snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir, remotes=none)


def test_open_passes_the_remotes_tls_files(fresh_daemon, tmp_path):
    os.makedirs(fresh_daemon.runtime_dir)
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a take")
    # A certificate without its key: refused at open, by the library.
    with pytest.raises(snowflake.InvalidArgumentError, match="both or neither"):
        snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir,
                         remotes="https://127.0.0.1:1", remotes_ca=ca, remotes_cert=str(ca))
    # A file that cannot be read: named.
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(snowflake.InvalidArgumentError, match="missing.pem"):
        snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir,
                         remotes="https://127.0.0.1:1", remotes_ca=missing)
    with pytest.raises(snowflake.InvalidArgumentError, match="path"):
        snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir,
                         remotes="https://127.0.0.1:1", remotes_ca=3)
    # A readable CA: the https:// remote is tried, and its failure names it.
    with snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir,
                          remotes="https://127.0.0.1:1", remotes_ca=ca) as client:
        with pytest.raises(snowflake.UnavailableError, match="https://127.0.0.1:1"):
            client.next()


def test_open_refuses_an_untrusted_segment(fresh_daemon):
    os.makedirs(os.path.join(fresh_daemon.runtime_dir, "snowflake.ring"))
    with pytest.raises(snowflake.UntrustedSegmentError) as e:
        snowflake.Client("orders", runtime_dir=fresh_daemon.runtime_dir)
    assert e.value.code == "untrusted_segment" and e.value.message


def test_open_refuses_a_corrupt_segment(daemon):
    daemon.stop()
    path = os.path.join(daemon.runtime_dir, "snowflake.ring")
    with open(path, "r+b") as f:
        f.write(b"\0" * 64)  # the magic and format version
    with pytest.raises((snowflake.CorruptSegmentError, snowflake.IncompatibleVersionError)) as e:
        snowflake.Client("orders", runtime_dir=daemon.runtime_dir)
    assert e.value.message


def test_take_from_a_stopped_daemon_raises_daemon_stopped(daemon):
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        client.next()
        assert daemon.stop() == 0
        with pytest.raises(snowflake.DaemonStoppedError) as e:
            for _ in range(10_000_000):
                client.next()
    assert e.value.code == "daemon_stopped" and e.value.status == 11


def test_take_from_an_empty_ring_without_waiting_raises_ring_empty(daemon):
    # A healthy daemon's ring found empty: retry here, not a failover.
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir, timeout=0) as client:
        with pytest.raises(snowflake.RingEmptyError) as e:
            for _ in range(1000):
                client.next_batch(1 << 20)
    assert e.value.code == "ring_empty" and e.value.status == 17
    assert e.value.action == "retry_here"
    assert not isinstance(e.value, snowflake.UnavailableError)
    assert e.value.message.endswith("retry here"), e.value.message


def test_a_batch_cut_short_by_an_error_returns_the_ids_it_took(daemon):
    # timeout=0: a batch larger than the ring takes what the ring holds, then finds it
    # empty (ring_empty). What it took comes back, never thrown away; the error is raised by
    # a call that finds the ring empty before taking anything.
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir) as client:
        client.next()  # the daemon is awake and fills its ring
        deadline = time.monotonic() + 10
        while client.status()["ring_fill"] == 0:
            assert time.monotonic() < deadline, "the ring stayed empty"
    with snowflake.Client("orders", runtime_dir=daemon.runtime_dir, timeout=0) as client:
        returned = []
        with pytest.raises(snowflake.RingEmptyError):
            for _ in range(1000):
                batch = client.next_batch(1 << 20)
                assert 1 <= len(batch) < 1 << 20
                returned.extend(batch)
        assert returned, "the first batch raised: the ring was empty after all"
        assert returned == sorted(set(returned))
        assert client.status()["client_taken"] == len(returned), "taken IDs were thrown away"


def test_errors_form_one_hierarchy():
    for name in snowflake.__all__:
        obj = getattr(snowflake, name)
        if isinstance(obj, type) and name.endswith("Error"):
            assert issubclass(obj, snowflake.Error)
    error = snowflake.DaemonPausedError("paused: clock moved back", "daemon_paused", 9)
    assert isinstance(error, snowflake.UnavailableError)
    assert (error.message, error.code, error.status) == ("paused: clock moved back",
                                                        "daemon_paused", 9)


def test_every_library_code_has_its_own_exception_class():
    # The codes are the C ABI's (sf_status_str, from the one vocabulary table); a status
    # without a class here would raise a bare RuntimeError.
    codes = snowflake._snowflake._error_codes()
    assert [status for status, _, _ in codes] == list(range(1, len(codes) + 1))
    classes = [snowflake._ERRORS[code] for _, code, _ in codes]
    assert len(set(classes)) == len(classes), "two codes share one class"
    assert set(snowflake._ERRORS) == {code for _, code, _ in codes}
    for cls in classes:
        assert issubclass(cls, snowflake.Error)


def test_ring_empty_is_its_own_class_to_retry_here():
    cls = snowflake._ERRORS["ring_empty"]
    assert cls is snowflake.RingEmptyError and cls.action == "retry_here"
    assert issubclass(cls, snowflake.Error) and not issubclass(cls, snowflake.UnavailableError)
    assert snowflake.TimedOutError.action == "fail_over"
    assert ("ring_empty" in {code for _, code, _ in snowflake._snowflake._error_codes()})


def test_exactly_the_fail_over_codes_are_unavailable_errors():
    # The one failover rule is the vocabulary's action column (sf_status_action): a caller
    # who catches UnavailableError fails over on exactly the codes every other language does.
    for status, code, action in snowflake._snowflake._error_codes():
        cls = snowflake._ERRORS[code]
        assert issubclass(cls, snowflake.UnavailableError) == (action == "fail_over"), (
            f"{code} ({status}) is {cls.__name__}, its action is {action}")
        assert cls.action == action, f"{cls.__name__}.action is {cls.action}, not {action}"
