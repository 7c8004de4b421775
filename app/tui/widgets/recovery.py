"""The recovery ledger as text for the run detail's Resumptions tab: one line per resumption that ended
otherwise than the run's end (how, detection and restart times, steps redone), then the goodput."""

from __future__ import annotations

from rich.text import Text

from .. import format as fmt


def _secs(value: float | None) -> str:
    return "-" if value is None else fmt.duration(value)


def recovery_text(ledger) -> Text:
    out = Text()
    for e in ledger.entries[:-1] if len(ledger.entries) > 1 else []:
        out.append(f"#{e.resumption} {e.ended or 'running'}", style="bold")
        if e.why:
            out.append(f" ({e.why})")
        if e.detect_s is not None:
            out.append(f"  detected after {_secs(e.detect_s)}")
        if e.restart_s is not None:
            out.append(f"  next first step {_secs(e.restart_s)} later")
        if e.steps_redone is not None:
            out.append(f"  {e.steps_redone} steps redone ({_secs(e.lost_s)})")
        out.append("\n")
    if ledger.goodput is not None:
        out.append(f"goodput {ledger.goodput:.0%}", style="bold")
        out.append(f"  {_secs(ledger.useful_s)} on steps that counted of {_secs(ledger.wall_s)} since the first launch")
    return out
