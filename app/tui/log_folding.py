"""What the TUI shows of a paused job's log: torchrun reports every non-zero exit as a failure, so
a graceful pause (each rank exits 75 after its checkpoint) ends in a ~25-line "ChildFailedError ...
FAILED ... exitcode: 75" block. That block is folded into one line that says what happened.

Display only: the run's state comes from the registry, never from this text. A block is folded once
it is complete (its closing ===== line is there), so a log read while the job exits shows the block
either whole or folded, never cut.
"""

from __future__ import annotations

import re

PAUSED_LINE = "[foundry] paused: the ranks exited 75 after their checkpoint (torchrun's exit report folded)"
_PREFIX = re.compile(r"^\[(rank \d+|launcher)\]\s*(\d\d:\d\d:\d\d\s*)?")
_START = re.compile(r"torch/distributed/elastic/.*failed \(exitcode: 75\)")
_EXIT_75 = re.compile(r"exitcode\s*:\s*75\b")
_RULE = re.compile(r"^=+$")


def _text(line: str) -> str:
    return _PREFIX.sub("", line).strip()


def fold_paused_exit(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not _START.search(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        end = _block_end(lines, i)
        if end is None or not any(_EXIT_75.search(_text(line)) for line in lines[i:end + 1]):
            out.append(lines[i])
            i += 1
            continue
        out.append(PAUSED_LINE)
        i = end + 1
    return out


def _block_end(lines: list[str], start: int) -> int | None:
    """The closing ===== line after "Root Cause", within torchrun's report."""
    seen_root = False
    for j in range(start, min(len(lines), start + 200)):
        text = _text(lines[j])
        if text.startswith("Root Cause"):
            seen_root = True
        elif seen_root and _RULE.match(text):
            return j
    return None
