"""One run: loss and throughput plotted live from metrics.jsonl, the resumptions as a timeline,
checkpoints with their storage URLs, the resolved config and the end of the logs."""

from __future__ import annotations

import yaml
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Log, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from foundry.app.control import (ACTIVE_STATUSES, egress_cost_line, egress_rows, request_line, run_cost_line,
                                 steps_by_resumption)

from .. import format as fmt
from ..widgets.runs import MetricPlot, ResumptionTimeline, status_text
from .base import FoundryScreen
from ..log_folding import fold_paused_exit
from .run_actions import RUN_BINDINGS, RUN_MUTATING, RunActions
from ..widgets.recovery import recovery_text

LOG_TAIL = 200


class RunDetailScreen(RunActions, FoundryScreen):
    TITLE = "Run"
    MUTATING = RUN_MUTATING
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), *RUN_BINDINGS,
                Binding("ctrl+r", "refresh", "Refresh", show=False)]

    def __init__(self, run_name: str):
        super().__init__()
        self.run_name = run_name
        self._ticks = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(self.run_name), id="run-summary")
        with TabbedContent(id="run-tabs"):
            with TabPane("Metrics", id="tab-metrics"):
                with Horizontal(id="plots"):
                    yield MetricPlot("loss", "loss", id="plot-loss")
                    yield MetricPlot("throughput", "throughput (ba/s)", id="plot-throughput")
            with TabPane("Resumptions", id="tab-resumptions"):
                yield ResumptionTimeline("loading…", id="timeline")
                yield Static("", id="recovery")    # the recovery ledger and goodput (app/control/recovery.py)
                yield Static("", id="transfers")   # bytes per node and store; shown once a job reported some
            with TabPane("Checkpoints", id="tab-checkpoints"):
                yield DataTable(id="checkpoints", cursor_type="row")
                yield Static("", id="checkpoint-url", markup=False)
            with TabPane("Config", id="tab-config"):
                with VerticalScroll():
                    yield Static("loading…", id="config", markup=False)
            with TabPane("Logs", id="tab-logs"):
                yield Log(id="detail-log")
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title(f"Run: {self.run_name}")
        table = self.query_one("#checkpoints", DataTable)
        for key, label in (("name", "checkpoint"), ("step", "step"), ("state", "state"), ("size", "size"),
                           ("url", "url")):
            table.add_column(label, key=key)
        self.refresh_run()
        self.set_interval(self.app.refresh_interval, self.tick)

    def tick(self) -> None:
        if not self.busy("refresh run"):
            self.refresh_run()

    def action_refresh(self) -> None:
        self._ticks = 0
        self.refresh_run()

    def selected_run(self) -> str:
        return self.run_name

    def run_status(self, name: str) -> str | None:
        return getattr(self, "status", None)

    def after_change(self) -> None:
        self.action_refresh()

    def after_delete(self, name: str) -> None:
        self.app.pop_screen()

    @work(thread=True, exclusive=True, exit_on_error=False, name="refresh run", group="refresh")
    def refresh_run(self) -> None:
        plane = self.app.plane
        run = plane.get_run(self.run_name)
        records = plane.metrics(self.run_name)
        progress = plane.run_progress(run)
        spans = steps_by_resumption(run, records)
        ledger = plane.run_ledger(run, records, now=self.app.clock())  # an active run's wall time runs to now
        full = self._ticks % 5 == 0
        self._ticks += 1
        checkpoints = config = logs = url = usage = cost = None
        if full:
            usage = plane.egress(self.run_name)
            try:
                cost = plane.run_cost(run)
            except Exception as exc:  # a price table that does not parse: say so, keep the rest
                self.app.call_from_thread(self.app.report_failure, exc, "price the run")
            url = plane.save_url(run)
            config = plane.resolved_config(self.run_name)
            logs = list(plane.logs(self.run_name))[-LOG_TAIL:] if run.resumptions else []
            try:
                checkpoints = plane.run_checkpoints(run)  # read with the run's own secrets
            except Exception as exc:  # the store may be unreachable: say so, keep the rest
                self.app.call_from_thread(self.app.report_failure, exc, "list checkpoints")
        if get_current_worker().is_cancelled:
            return  # a newer refresh replaced this one
        self.app.call_from_thread(self._show, run, records, progress, spans, checkpoints, config, logs, url)
        self.app.call_from_thread(self._show_recovery, ledger)
        if usage is not None:
            self.app.call_from_thread(self._show_transfers, usage, cost)

    def _show_transfers(self, usage: dict, cost: dict | None) -> None:
        widget = self.query_one("#transfers", Static)
        widget.display = bool(usage["nodes"])
        if not usage["nodes"]:
            return
        from rich.table import Table

        # per resumption: compute, then the requests per store by billing class (request_cost.py)
        lines = [egress_cost_line(usage)] + ([run_cost_line(cost)] + [
            f"#{idx} compute ${c['usd']:.4f} ({c['basis']}); " + request_line(idx, c["requests"])
            for idx, c in cost["resumptions"].items()] if cost else [])
        table = Table(title="Transfers per node (exact bytes)", caption="\n".join(lines), expand=False)
        rows = egress_rows(usage)
        for key in rows[0]:
            table.add_column(key, justify="right" if key not in ("node",) else "left")
        for row in rows:
            table.add_row(*(str(v) for v in row.values()))
        widget.update(table)

    def _show_recovery(self, ledger) -> None:
        widget = self.query_one("#recovery", Static)
        widget.update(recovery_text(ledger))

    def _show(self, run, records, progress, spans, checkpoints, config, logs, url) -> None:
        now = self.app.clock()
        self.status = run.status
        summary = Text.assemble(
            (run.name, "bold"), "  ", status_text(run.status), f"  on {run.cluster} ({run.devices} dev, "
            f"{run.nodes} node)  step {fmt.steps_long(progress, run.status in ACTIVE_STATUSES)}  loss "
            f"{fmt.number(progress.loss)}  {fmt.number(progress.throughput, 3)} ba/s  "
            + (f"MFU {progress.mfu:.1%}  " if progress.mfu is not None else "") + "ETA "
            f"{fmt.duration(progress.eta_s)}  retries {run.retries_used}/{run.max_retries}  age "
            f"{fmt.age(run.created_at, now)}")
        self.query_one("#run-summary", Static).update(summary)
        self.query_one("#plot-loss", MetricPlot).show(records)
        self.query_one("#plot-throughput", MetricPlot).show(records)
        self.query_one(ResumptionTimeline).show(run.resumptions, spans, progress.max_steps, now)
        if checkpoints is not None:
            table = self.query_one("#checkpoints", DataTable)
            table.clear()
            for c in checkpoints:
                state = "latest" if c.latest else ("complete" if c.complete else "partial")
                table.add_row(c.name, str(c.batch), state, fmt.size(c.size), c.url, key=c.name)
            if not checkpoints:
                table.add_row("(none yet)", "", "", "", url or "no save_folder in the run spec")
            self._show_url(table.cursor_row)
        if config is not None:
            self.query_one("#config", Static).update(yaml.safe_dump(config, sort_keys=False).rstrip())
        if logs is not None:
            log = self.query_one("#detail-log", Log)
            log.clear()
            log.write_lines(fold_paused_exit(logs))

    def _show_url(self, row: int) -> None:
        table = self.query_one("#checkpoints", DataTable)
        if 0 <= row < table.row_count:
            self.query_one("#checkpoint-url", Static).update(str(table.get_row_at(row)[-1]))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "checkpoints":
            self._show_url(event.cursor_row)
