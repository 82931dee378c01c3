"""The takers' conformance table (tests/conformance/cases.json) for the Python module: every
row, from the fixtures conformance_fixture writes ($SNOWFLAKE_CONFORMANCE_FIXTURE; ctest
sets it). The C++ client and the Go, Java and Node.js packages run the same rows. For a row
that expects an error, the exception's class must follow the vocabulary's action for its
code (conformance_fixture --vocabulary): an UnavailableError exactly for fail_over."""

import functools

import json
import os
import pathlib
import subprocess

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


# The expect keys this runner checks: a row whose expect has another fails rather than
# pass with the check left out.
_KNOWN_EXPECT_KEYS = {"stage", "code", "message_contains", "count", "ids", "refill_hint",
                      "refill_request_min", "waiters", "uncounted", "service_taken"}
_REGION_KEYS = {"refill_hint", "refill_request_min", "waiters", "uncounted", "service_taken"}


def _region_words(directory):
    """The region's words (refill, waiters, counts), read by the fixture attached to the row's
    socket as a taker attaches (the region is a memfd: no file to read)."""
    tool = os.environ["SNOWFLAKE_CONFORMANCE_FIXTURE"]
    out = subprocess.run([tool, "--region-words", "--dir", str(directory)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


@functools.cache
def _actions():
    """{code: action} of the library's error codes, from the C++ tables."""
    tool = os.environ["SNOWFLAKE_CONFORMANCE_FIXTURE"]
    vocabulary = json.loads(subprocess.run([tool, "--vocabulary"], check=True,
                                           capture_output=True, text=True).stdout)
    return dict(zip(vocabulary["errors"], vocabulary["error_actions"]))


def _run(row, directory):
    """Opens, applies after_open, takes, closes: (stage, code, message, ids, published, error)."""
    published = _fixture(row["name"], directory)
    take = row["take"]
    try:
        client = snowflake.Client("conformance", runtime_dir=str(directory), remotes=[],
                                  timeout=take.get("timeout_ms", 100) / 1000)
    except snowflake.Error as e:
        return "open", e.code, e.message, [], published, e
    with client:
        if "after_open" in row:
            published = _fixture(row["name"], directory, after_open=True) or published
        try:
            if take["call"] == "next":
                ids = [client.next()]
            else:
                ids = list(client.next_batch(take["count"]))
        except snowflake.Error as e:
            return "take", e.code, e.message, [], published, e
    return "take", "ok", "", ids, published, None


@pytest.mark.parametrize("row", _TABLE["cases"], ids=[r["name"] for r in _TABLE["cases"]])
def test_row(row, tmp_path):
    expect = row.get("expect_by_taker", {}).get("python", row["expect"])
    if "python" in row.get("expect_by_taker", {}):
        print(f"{row['name']}: this taker's own expectation, because: {row['why']}")
    unknown = set(expect) - _KNOWN_EXPECT_KEYS
    assert not unknown, f"expect keys {sorted(unknown)} are not checked by this runner: add their checks"
    stage, code, message, ids, published, error = _run(row, tmp_path)
    assert (stage, code) == (expect["stage"], expect["code"]), message
    if expect["code"] != "ok":
        action = _actions()[expect["code"]]
        assert isinstance(error, snowflake.UnavailableError) == (action == "fail_over"), (
            f"{expect['code']} (action {action}) raised {type(error).__name__}")
        assert error.action == action, f"{type(error).__name__}.action is {error.action}"
    assert expect.get("message_contains", "") in message
    if "count" in expect:
        assert len(ids) == expect["count"]
    if expect.get("ids") == "published":
        assert ids == published[:len(ids)]
    if _REGION_KEYS & set(expect):
        words = _region_words(tmp_path)
        if "refill_hint" in expect:
            assert words["refill_hint"] == expect["refill_hint"]
        if "refill_request_min" in expect:
            assert words["refill_request"] >= expect["refill_request_min"]
        if "waiters" in expect:
            assert words["waiters"] == expect["waiters"]
        if "uncounted" in expect:
            assert words["uncounted"] == expect["uncounted"]
        if "service_taken" in expect:
            assert words["service_taken"] == expect["service_taken"], "IDs taken per service"
