"""Write-then-rename: a file's final name only ever holds complete content.

Every layer writes its small state files (secrets, clusters.yaml, stamps, exit codes, index.json)
and its downloads through these two, so there is one temporary-name scheme, one cleanup and one
place where the mode is set:

- the temporary file sits beside the target (same filesystem, so `os.replace` is atomic) under a
  unique hidden name (`.NAME.<random>.part`): concurrent writers, threads or processes, never share
  one, and the last rename wins with a complete file;
- it is created with its final mode (`mode` less the umask, as `open()` would), never chmod-ed after,
  so a secret (0600) is never readable by others, not even for a moment;
- on any failure it is removed and the old content stays as it was.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

TEMP_SUFFIX = ".part"


def is_temp_name(name: str) -> bool:
    """True for the name of an in-flight write: listings skip it (backends/storage/file.py)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def _create_temp(target: Path, mode: int) -> str:
    for _ in range(100):
        tmp = target.parent / f".{target.name}.{os.urandom(6).hex()}{TEMP_SUFFIX}"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
        except FileExistsError:
            continue
        return str(tmp)
    raise FileExistsError(f"no free temporary name beside {target}")


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike, *, mode: int = 0o666, fsync: bool = False) -> Iterator[str]:
    """Yield the path of an empty temporary file beside `path`; renamed onto `path` when the block
    ends without an exception, removed otherwise. Parent folders are created.

    `mode` 0o666 (less the umask) is what `open()` gives: datasets and checkpoints are shared like
    any file the user writes. `fsync=True` flushes the content to disk before the rename (for
    state that must survive a power cut, such as secrets)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temp(target, mode)
    try:
        yield tmp
        if fsync:
            _fsync(tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write(path: str | os.PathLike, data: bytes | str, *, mode: int = 0o666, fsync: bool = False) -> None:
    """Replace the content of `path` with `data` (str is written as UTF-8) in one rename."""
    raw = data.encode() if isinstance(data, str) else data
    with atomic_path(path, mode=mode, fsync=fsync) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(raw)
