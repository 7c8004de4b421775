"""The test tiers (tests/support/tiers.py): cost marks come from fixtures and folders and imply `slow`,
so `-m "not slow"` leaves them out; under CI an unmarked test that runs too long fails and says which
mark to add. Each case is a small pytest session run in this process (pytester)."""

from __future__ import annotations

import pytest

FILES = {
    "conftest.py": """
import pytest

@pytest.fixture
def s3_server():
    return "a server"

@pytest.fixture
def s3_bucket(s3_server):
    return "a bucket"
""",
    "test_costs.py": """
import time
import pytest

def test_plain():
    pass

def test_bucket(s3_bucket):
    pass

@pytest.mark.subprocess
def test_starts_a_process():
    pass

def test_sleeps():
    time.sleep(0.3)

@pytest.mark.slow
def test_sleeps_marked():
    time.sleep(0.3)
""",
}


@pytest.fixture
def session(pytester, monkeypatch):
    pytester.makepyfile(**{name.removesuffix(".py"): text for name, text in FILES.items()})
    pytester.makeini("[pytest]\nmarkers =\n    slow\n    subprocess\n    integration\n")
    for name in ("CI", "FOUNDRY_UNMARKED_LIMIT_S"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the inner session: only the plugin under test
    return lambda *args: pytester.runpytest_inprocess("-p", "support.tiers", "-p", "no:cacheprovider", *args)


def test_a_cost_from_a_fixture_or_a_mark_leaves_the_fast_tier(session):
    result = session("-m", "not slow", "-q")
    result.assert_outcomes(passed=2, deselected=3)  # test_plain, test_sleeps
    picked = session("-m", "integration", "-q", "--co")
    assert "test_bucket" in picked.stdout.str() and "test_plain" not in picked.stdout.str()


def test_under_ci_an_unmarked_test_over_the_limit_fails_naming_the_mark(session, monkeypatch):
    monkeypatch.setenv("FOUNDRY_UNMARKED_LIMIT_S", "0.2")
    assert session("-q").ret == 0  # not under CI: only timed, never failed
    monkeypatch.setenv("CI", "true")
    result = session("-q")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*test_sleeps ran * s (over 0.2 s) with no cost mark: add @pytest.mark.subprocess*"])
    assert "test_sleeps_marked ran" not in result.stdout.str()
