"""Fixtures for the snowflake module's tests: a real snowflaked in a temporary directory.

SNOWFLAKED names the daemon binary (ctest sets it to the build's). A run in which no test
passed, or in which any test was skipped, fails: an empty or skipped suite is no success.
"""

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import snowflake

_outcomes = {"passed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.skipped:
        _outcomes["skipped"] += 1
    elif report.when == "call" and report.passed:
        _outcomes["passed"] += 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and (_outcomes["passed"] == 0 or _outcomes["skipped"] > 0):
        print(f"\nconftest: {_outcomes['passed']} passed, {_outcomes['skipped']} skipped: "
              "a run must pass at least one test and skip none")
        session.exitstatus = 1


class Daemon:
    """A snowflaked of its own: runtime, state and machine-lock directories in a fresh
    temporary directory, stopped (and the directory removed) by remove().

    Each start() binds a notify socket of the harness's own in that directory and passes
    it as NOTIFY_SOCKET, as systemd does for a Type=notify service: wait_ready() returns
    once the daemon sent READY=1 on it, which it does once its ring serves (or, started out
    of service, once it waits for an operator: docs/daemon.md)."""

    def __init__(self):
        binary = os.environ.get("SNOWFLAKED")
        if not binary or not os.access(binary, os.X_OK):
            pytest.fail("SNOWFLAKED must name the snowflaked binary (ctest sets it)")
        self.binary = binary
        # Short: the control and notify sockets' paths must fit sockaddr_un.
        self.root = tempfile.mkdtemp(prefix="sf-py-")
        self.runtime_dir = os.path.join(self.root, "run")
        self.state_dir = os.path.join(self.root, "state")
        self.log_path = os.path.join(self.root, "daemon.log")
        self.process = None
        self._starts = 0
        self._notify = None  # this start's notify socket, until READY=1 came

    def start(self, args=(), env=None):
        """Spawns the daemon with `args` added to its command line and `env` to its
        environment (after NOTIFY_SOCKET, so a test may point that elsewhere); does not
        wait: see wait_ready()."""
        os.makedirs(self.runtime_dir, exist_ok=True)
        os.makedirs(self.state_dir, exist_ok=True)
        # A socket per start: a READY=1 of a killed predecessor never counts for its successor.
        self._close_notify()
        self._starts += 1
        notify_path = os.path.join(self.root, f"notify-{self._starts}")
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._notify.bind(notify_path)
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
                                    "LISTEN_PID", "SNOWFLAKE_REMOTES", "SNOWFLAKE_RUNTIME_DIR")}
        # Its own machine-number locks: never competes with the host's daemons.
        environment["SNOWFLAKE_HOST_LOCK_DIR"] = os.path.join(self.root, "locks")
        environment["NOTIFY_SOCKET"] = notify_path
        environment.update(env or {})
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--runtime-dir", self.runtime_dir, "--state-dir",
                 self.state_dir, "--log-level", "warn", *args],
                stdout=log, stderr=subprocess.STDOUT, env=environment)
        return self

    def wait_ready(self, timeout=30.0):
        """Returns once the daemon sent READY=1; fails the test, with the daemon's output,
        if it exits first or sends none within `timeout` seconds. Waits on the socket and
        on the process (a pidfd) at once: no polling."""
        if self._notify is None:
            pytest.fail("wait_ready() without a start(), or twice for one start")
        deadline = time.monotonic() + timeout
        exited = os.pidfd_open(self.process.pid)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"snowflaked (pid {self.process.pid}, running) sent no READY=1 "
                                f"within {timeout} s on {self._notify.getsockname()}; "
                                f"its output:\n{self.log()}")
                readable, _, _ = select.select([self._notify, exited], [], [], left)
                if self._notify in readable:  # before the exit: it may have sent READY=1 first
                    datagram = self._notify.recv(65536).decode(errors="replace")
                    if "READY=1" in datagram.split("\n"):
                        # Later notifications are refused, which the daemon ignores.
                        self._close_notify()
                        return self
                elif exited in readable:
                    status = self.process.wait()
                    pytest.fail(f"snowflaked exited with {status} before READY=1; "
                                f"its output:\n{self.log()}")
        finally:
            os.close(exited)

    def wait_serving(self, timeout=30.0):
        """For a daemon that has served and may be held up (SIGSTOP, a pause): returns once
        a take succeeds; fails the test after `timeout` seconds. A start waits with
        wait_ready()."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"snowflaked exited with {self.process.returncode}: {self.log()}")
            try:
                with snowflake.Client("readiness", runtime_dir=self.runtime_dir) as client:
                    client.next()
                return self
            except (snowflake.DaemonNotRunningError, snowflake.DaemonStartingError,
                    snowflake.TimedOutError, snowflake.RingEmptyError,
                    snowflake.DaemonNotHeartbeatingError) as e:
                last = e
                time.sleep(0.02)
        pytest.fail(f"snowflaked not serving after {timeout} s ({last}): {self.log()}")

    def signal(self, sig):
        self.process.send_signal(sig)

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGCONT)  # in case a test stopped it
        self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return "(no log)"

    def _close_notify(self):
        if self._notify is not None:
            path = self._notify.getsockname()
            self._notify.close()
            self._notify = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def remove(self):
        self.stop()
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_notify()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def daemon():
    d = Daemon()
    try:
        yield d.start().wait_ready()
    finally:
        d.remove()


@pytest.fixture
def fresh_daemon():
    """A Daemon not yet started."""
    d = Daemon()
    yield d
    d.remove()
