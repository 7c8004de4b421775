"""Run widgets: the runs table, the resumptions timeline and the live metric plot."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table
from rich.text import Text
from textual.widgets import Static
from textual_plotext import PlotextPlot

from foundry.app.control import ACTIVE_STATUSES

from .. import format as fmt
from .tables import LiveTable, Row

RUN_COLUMNS = [("name", "name"), ("cluster", "cluster"), ("status", "status"), ("resumptions", "res"),
               ("step", "step/max"), ("loss", "loss"), ("throughput", "ba/s"), ("eta", "ETA"), ("age", "age")]


def status_text(status: str) -> Text:
    return Text(status, style=fmt.STATUS_STYLE.get(status, ""))


def run_row(run, progress, now: float) -> Row:
    return (run.name, [run.name, run.cluster, status_text(run.status), str(len(run.resumptions)),
                       fmt.steps(progress, run.status in ACTIVE_STATUSES), fmt.number(progress.loss),
                       fmt.number(progress.throughput, 3), fmt.duration(progress.eta_s),
                       fmt.age(run.created_at, now)])


class RunTable(LiveTable):
    def __init__(self, **kwargs: Any):
        super().__init__(RUN_COLUMNS, **kwargs)


class ResumptionTimeline(Static):
    """One line per resumption: index, cluster, devices, state, the checkpoint it resumed from (when
    any did), the steps it covered as a bar."""

    def show(self, resumptions: Sequence[Any], spans: dict[int, tuple[int, int]], max_steps: int | None,
             now: float) -> None:
        top = max([max_steps or 0] + [hi for _, hi in spans.values()]) or 1
        table = Table(box=None, expand=True, show_header=True, pad_edge=False)
        resumed = any(getattr(r, "resumed_from", None) for r in resumptions)
        for col in ("#", "cluster", "dev", "state", "steps", "took") + (("resumed from",) if resumed else ()):
            table.add_column(col, no_wrap=True)
        table.add_column("timeline", ratio=1, no_wrap=True)
        width = 30
        for r in resumptions:
            lo, hi = spans.get(r.index, (None, None))
            bar = Text()
            if lo is not None:
                a, b = int(width * lo / top), max(int(width * hi / top), int(width * lo / top) + 1)
                bar.append(" " * a)
                bar.append("█" * (b - a), style=fmt.STATUS_STYLE.get(r.state, "white"))
            steps = f"{lo}-{hi}" if lo is not None else "-"
            took = fmt.duration(((r.ended_at or now) - r.started_at) if r.started_at else None)
            origin = ((r.resumed_from or "-").rstrip("/").rsplit("/", 1)[-1],) if resumed else ()
            table.add_row(str(r.index), r.cluster, str(r.devices), status_text(r.state), steps, took, *origin, bar)
        self.update(table if resumptions else "no resumptions yet")


class MetricPlot(PlotextPlot):
    """A line plot of one metric against step, redrawn when `show` gets new rows."""

    def __init__(self, metric: str, title: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.metric, self.title = metric, title
        self._count = -1

    def on_mount(self) -> None:
        self.plt.title(self.title)
        self.plt.xlabel("step")

    def show(self, records: Sequence[dict[str, Any]]) -> None:
        points = [(r["step"], r[self.metric]) for r in records
                  if isinstance(r.get("step"), int) and isinstance(r.get(self.metric), (int, float))]
        if len(points) == self._count:
            return
        self._count = len(points)
        self.plt.clear_data()
        if points:
            xs, ys = zip(*points)
            self.plt.plot(list(xs), list(ys), marker="braille")
        self.refresh()
