"""One line on the runs screen: whether a watchdog (`foundry watch`) runs for this home. Without one,
a run lost to a system failure is relaunched only when some command reads it."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .. import format as fmt


def watchdog_text(watchdogs: list, now: float) -> Text:
    if not watchdogs:
        return Text.assemble(("no watchdog", "bold yellow"), ": lost runs wait for a command (`foundry watch --daemon`)")
    w = watchdogs[0]
    more = f" (+{len(watchdogs) - 1} more)" if len(watchdogs) > 1 else ""
    last = f"last pass {fmt.age(w.last_pass, now)} ago" if w.last_pass else "first pass running"
    return Text.assemble(("watchdog", "bold green"), f" runs: pid {w.pid} on {w.host}"
                         f"{' (daemon)' if w.daemon else ''}, every {w.interval:g}s, {last}{more}")


class WatchdogLine(Static):
    DEFAULT_CSS = """
    WatchdogLine { height: 1; padding: 0 1; color: $text-muted; }
    """

    def show(self, watchdogs: list, now: float) -> None:
        self.update(watchdog_text(watchdogs, now))
