"""Write-then-rename (plugins/atomic_files.py): the final name only ever holds complete content,
a failure leaves the old content and no temporary file, the mode is set at creation."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from foundry.plugins.atomic_files import atomic_path, atomic_write, is_temp_name


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def leftovers(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if is_temp_name(p.name)]


def test_write_replaces_content_and_creates_folders(tmp_path):
    target = tmp_path / "a" / "b" / "state.yaml"
    atomic_write(target, "one")
    atomic_write(target, b"two")
    assert target.read_text() == "two"
    assert leftovers(target.parent) == []


def test_a_failure_leaves_the_old_content_and_no_temporary_file(tmp_path):
    target = tmp_path / "clusters.yaml"
    atomic_write(target, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            with open(tmp, "w") as fh:
                fh.write("half of the new")
            raise RuntimeError("the writer died")
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_a_failed_rename_removes_the_temporary_file(tmp_path):
    target = tmp_path / "busy"
    (target / "inside").mkdir(parents=True)  # a non-empty folder: os.replace cannot replace it
    with pytest.raises(OSError):
        atomic_write(target, "data")
    assert target.is_dir() and leftovers(tmp_path) == []


def test_a_secret_is_created_0600_never_chmod_ed_after(tmp_path, umask_022):
    target = tmp_path / "secret.json"
    with atomic_path(target, mode=0o600, fsync=True) as tmp:
        assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o600  # already private while it is being written
        with open(tmp, "w") as fh:
            fh.write("{}")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_default_mode_is_what_open_gives(tmp_path, umask_022):
    atomic_write(tmp_path / "shared.bin", b"x")
    assert stat.S_IMODE((tmp_path / "shared.bin").stat().st_mode) == 0o644


def test_concurrent_writers_never_expose_a_partial_file(tmp_path):
    target = tmp_path / "index.json"
    payloads = [bytes([65 + i]) * (256 << 10) for i in range(4)]  # 256 KiB each: writes take a while
    atomic_write(target, payloads[0])
    stop, seen, errors = threading.Event(), set(), []

    def writer(data: bytes) -> None:
        try:
            for _ in range(20):
                atomic_write(target, data)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            seen.add(target.read_bytes())

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert errors == []
    assert seen <= set(payloads)  # every read was one writer's complete content
    assert target.read_bytes() in payloads
    assert leftovers(tmp_path) == []
