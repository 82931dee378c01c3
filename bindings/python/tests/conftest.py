"""Fixtures for the snowflake module's tests: a real snowflaked in a temporary directory.

SNOWFLAKED names the daemon binary (ctest sets it to the build's). A run in which no test
passed, or in which any test was skipped, fails: an empty or skipped suite is no success.
"""

import os
import shutil
import signal
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
    temporary directory, stopped (and the directory removed) by stop()."""

    def __init__(self):
        binary = os.environ.get("SNOWFLAKED")
        if not binary or not os.access(binary, os.X_OK):
            pytest.fail("SNOWFLAKED must name the snowflaked binary (ctest sets it)")
        self.binary = binary
        # Short: the control socket's path must fit sockaddr_un.
        self.root = tempfile.mkdtemp(prefix="sf-py-")
        self.runtime_dir = os.path.join(self.root, "run")
        self.state_dir = os.path.join(self.root, "state")
        self.log_path = os.path.join(self.root, "daemon.log")
        self.process = None

    def start(self):
        os.makedirs(self.runtime_dir, exist_ok=True)
        os.makedirs(self.state_dir, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
                            "LISTEN_PID", "SNOWFLAKE_REMOTES", "SNOWFLAKE_RUNTIME_DIR")}
        # Its own machine-number locks: never competes with the host's daemons.
        env["SNOWFLAKE_HOST_LOCK_DIR"] = os.path.join(self.root, "locks")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--runtime-dir", self.runtime_dir, "--state-dir",
                 self.state_dir, "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    def wait_serving(self, timeout=30.0):
        """Returns once a take succeeds; fails the test after `timeout` seconds."""
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

    def remove(self):
        self.stop()
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def daemon():
    d = Daemon().start().wait_serving()
    yield d
    d.remove()


@pytest.fixture
def fresh_daemon():
    """A Daemon not yet started."""
    d = Daemon()
    yield d
    d.remove()
