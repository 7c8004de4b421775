"""Suite-wide fixtures: an isolated FOUNDRY_HOME, no third-party plugin autoload, a fresh plugin manager.

Two checks CI turns on (.ci/run):
- FOUNDRY_REQUIRE_INTEGRATION=1: a skipped test fails, unless its skip is expected (a doc block
  marked to skip, a real-cluster test that needs KUBECONFIG). A missing SeaweedFS, fake-gcs-server,
  Slurm or SDK then shows as a failure, never as a quiet "s".
- FOUNDRY_CHECK_TMP=1: the session fails when it leaves new entries in the temp folder (tests use
  tmp_path; subprocesses get their own TMPDIR).

Every test runs with its own TMPDIR (short, so unix-socket paths below it stay valid), inherited
by what it starts: torchrun's torchelastic_* folders, a SIGKILLed process's temporary folders and
the servers' logs land there, and the whole tree goes when the session ends.

Tests are tiered by cost (marks, the fast tier, the CI check on unmarked slow tests): support/tiers.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import sys

import pytest

EXPECTED_SKIPS = ("doc block ", "real-cluster test")

# Shared fixtures, one module per kind of real server (see tests/support/).
pytest_plugins = ["support.storage_servers", "support.slurm", "support.peers", "support.oci_stub",
                  "support.control", "support.multinode", "support.tiers", "support.parallel", "pytester"]


_LOOPBACK_PREFIXES = ("127.", "::1", "localhost", "0:0:0:0:0:0:0:1")


@pytest.fixture(autouse=True, scope="session")
def _loopback_only():
    """Tests talk to servers on this machine only: refuse in-process connections elsewhere."""
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0])
            if not host.startswith(_LOOPBACK_PREFIXES):
                raise ConnectionRefusedError(f"tests may only connect to loopback, not {host}")

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    yield
    socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex


@pytest.fixture(scope="session", autouse=True)
def _short_tmp_root(tmp_path_factory):
    """The root of the per-test TMPDIRs; session-scoped servers and jobs (SeaweedFS's logs, a
    module's torchrun) get a folder of their own below it, as they start before any test's."""
    tmp_path_factory.getbasetemp()  # pytest's own base stays in the real temp folder
    root = tempfile.mkdtemp(prefix="ft-")
    session = os.path.join(root, "session")
    os.mkdir(session)
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = session, session
    try:
        yield root
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_tmpdir(_short_tmp_root, monkeypatch):
    """A TMPDIR per test, for this process (tempfile) and everything it starts."""
    own = tempfile.mkdtemp(prefix="t", dir=_short_tmp_root)
    monkeypatch.setenv("TMPDIR", own)
    monkeypatch.setattr(tempfile, "tempdir", own)
    yield own


@pytest.fixture(autouse=True)
def _isolated_foundry(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_HOME", str(tmp_path / "foundry-home"))
    monkeypatch.setenv("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("FOUNDRY_LOAD_PLUGINS", raising=False)
    from foundry.plugins.manager import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("FOUNDRY_REQUIRE_INTEGRATION") == "1" and not hasattr(report, "wasxfail"):
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if not reason.startswith(EXPECTED_SKIPS):
            report.outcome = "failed"
            report.longrepr = f"unexpected skip with FOUNDRY_REQUIRE_INTEGRATION=1: {reason}"


def _temp_entries() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if not name.startswith("pytest-of-")}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    session.config._foundry_tmp_before = _temp_entries()


@pytest.hookimpl(trylast=True)  # after plugins remove their own session folders (textual-snapshot's)
def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("FOUNDRY_CHECK_TMP") != "1" or hasattr(session.config, "workerinput"):
        return
    left = sorted(_temp_entries() - session.config._foundry_tmp_before)
    if left:
        shown = ", ".join(left[:20]) + (f" (+{len(left) - 20} more)" if len(left) > 20 else "")
        session.config.get_terminal_writer().line(
            f"FOUNDRY_CHECK_TMP: the tests left {len(left)} new entries in {tempfile.gettempdir()}: {shown}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    """A multiprocessing child still alive here (a DataLoader worker that ignores SIGTERM, left by a
    failed test) would hang the interpreter's exit: multiprocessing's exit hook joins it without a
    timeout. Kill those, our own children by their recorded Process objects, and say so."""
    import multiprocessing

    left = multiprocessing.active_children()
    for child in left:
        child.kill()
        child.join(5)
    if left:
        names = ", ".join(f"{c.name} (pid {c.pid})" for c in left)
        print(f"\nconftest: killed {len(left)} child process(es) the tests left alive: {names}", file=sys.stderr)
