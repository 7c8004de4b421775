"""A run's metrics.jsonl, parsed once: each call parses only the lines added since the last one.

Dashboards refresh every second and a long run writes a row per step, so re-parsing the whole
file on every refresh costs more the longer the run goes. Per file this keeps how far it has read
and the rows parsed so far. A file that shrank or was replaced (a deleted and recreated run) is
read again from the start.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field


@dataclass
class _Parsed:
    identity: tuple[int, int] | None = None   # (device, inode) of the file read so far
    offset: int = 0                            # bytes consumed: always at a line boundary
    rows: list[dict] = field(default_factory=list)


_lock = threading.Lock()
_parsed: dict[str, _Parsed] = {}


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """Every row of the file, oldest first; a line still being written is left out.

    The row dicts are shared between calls: read them, don't change them (the SDK hands out copies).
    """
    key = os.fspath(path)
    with _lock:
        try:
            st = os.stat(key)
        except FileNotFoundError:
            _parsed.pop(key, None)
            return []
        state = _parsed.setdefault(key, _Parsed())
        identity = (st.st_dev, st.st_ino)
        if state.identity != identity or st.st_size < state.offset:
            state.identity, state.offset, state.rows = identity, 0, []
        tail = b""
        if st.st_size > state.offset:
            with open(key, "rb") as f:
                f.seek(state.offset)
                chunk = f.read(st.st_size - state.offset)
            end = chunk.rfind(b"\n") + 1
            state.rows.extend(row for line in chunk[:end].splitlines() if (row := _row(line)) is not None)
            state.offset += end
            tail = chunk[end:]
        rows = list(state.rows)
    # A last row without its newline counts when it is already whole JSON; it is read again next
    # time, as it may still be growing.
    if tail and (row := _row(tail)) is not None:
        rows.append(row)
    return rows


def _row(line: bytes) -> dict | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None  # a line being written right now
    return row if isinstance(row, dict) else None
