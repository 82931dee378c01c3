"""The takers' conformance table (tests/conformance/cases.json) for the Python module: every
row, from the fixtures conformance_fixture writes ($SNOWFLAKE_CONFORMANCE_FIXTURE; ctest
sets it). The C++ client and the Go package run the same rows."""

import json
import os
import pathlib
import signal
import struct
import subprocess
import sys

import pytest

import snowflake

_CASES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "conformance" / "cases.json"
_TABLE = json.loads(_CASES.read_text())


def _fixture(name, directory, after_open=False):
    tool = os.environ.get("SNOWFLAKE_CONFORMANCE_FIXTURE")
    assert tool, "SNOWFLAKE_CONFORMANCE_FIXTURE must name the conformance_fixture binary"
    args = [tool, "--cases", str(_CASES), "--case", name, "--dir", str(directory),
            "--live-pid", str(os.getpid())]
    if after_open:
        args.append("--after-open")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [int(i) for i in json.loads(out)["ids"]]


def _consumer_word(directory, offset):
    with open(pathlib.Path(directory) / "snowflake.ring.consumer", "rb") as f:
        f.seek(offset)
        return struct.unpack("<I", f.read(4))[0]


def _run(row, directory):
    """Opens, applies after_open, takes: (stage, code, message, ids, published)."""
    published = _fixture(row["name"], directory)
    take = row["take"]
    try:
        client = snowflake.Client("conformance", runtime_dir=str(directory), remotes=[],
                                  timeout=take.get("timeout_ms", 100) / 1000)
    except snowflake.Error as e:
        return "open", e.code, e.message, [], published
    with client:
        if "after_open" in row:
            published = _fixture(row["name"], directory, after_open=True) or published
        try:
            if take["call"] == "next":
                ids = [client.next()]
            else:
                ids = list(client.next_batch(take["count"]))
        except snowflake.Error as e:
            return "take", e.code, e.message, [], published
    return "take", "ok", "", ids, published


@pytest.mark.parametrize("row", _TABLE["cases"], ids=[r["name"] for r in _TABLE["cases"]])
def test_row(row, tmp_path):
    expect = row.get("expect_by_taker", {}).get("python", row["expect"])
    if "python" in row.get("expect_by_taker", {}):
        print(f"{row['name']}: this taker's own expectation, because: {row['why']}")
    if "signal" in expect:
        # The process dies: run the row in a child of its own.
        child = subprocess.run(
            [sys.executable, "-c",
             "import json, pathlib, sys; sys.path.insert(0, sys.argv[1]); "
             "import test_conformance as t; "
             "row = [r for r in t._TABLE['cases'] if r['name'] == sys.argv[2]][0]; "
             "t._run(row, pathlib.Path(sys.argv[3]))",
             str(pathlib.Path(__file__).parent), row["name"], str(tmp_path)],
            capture_output=True, text=True)
        assert child.returncode == -getattr(signal, expect["signal"]), (child.returncode, child.stderr)
        return
    stage, code, message, ids, published = _run(row, tmp_path)
    assert (stage, code) == (expect["stage"], expect["code"]), message
    assert expect.get("message_contains", "") in message
    if "count" in expect:
        assert len(ids) == expect["count"]
    if expect.get("ids") == "published":
        assert ids == published[:len(ids)]
    if "refill_hint" in expect:
        assert _consumer_word(tmp_path, 68) == expect["refill_hint"]
    if "refill_request_min" in expect:
        assert _consumer_word(tmp_path, 64) >= expect["refill_request_min"]
