"""Logs of one run: follow the latest resumption (across resumptions), or one resumption and/or one
rank. Polls the provider's logs in a cancellable worker, so leaving the screen stops it."""

from __future__ import annotations

import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Header, Label, Log, Select
from textual.worker import get_current_worker

from foundry.app.control import ACTIVE_STATUSES

from ..log_folding import fold_paused_exit
from .base import FoundryScreen

LATEST, ALL = -1, -1


class LogsScreen(FoundryScreen):
    TITLE = "Logs"
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("f", "toggle_follow", "Follow"),
                Binding("c", "clear", "Clear")]

    def __init__(self, run_name: str, resumption: int | None = None, rank: int | None = None):
        super().__init__()
        self.run_name = run_name
        self.resumption = LATEST if resumption is None else resumption
        self.rank = ALL if rank is None else rank
        self.follow = True
        self.generation = 0  # bumped on every restart: a superseded worker's late lines are dropped

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="log-controls"):
            yield Label(f"{self.run_name}", id="log-title")
            yield Select([("latest", LATEST)], value=LATEST, allow_blank=False, id="log-resumption")
            yield Select([("all ranks", ALL)], value=ALL, allow_blank=False, id="log-rank")
            yield Label("following", id="log-state")
        yield Log(id="log", max_lines=20000)
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title(f"Logs: {self.run_name}")
        self.load_choices()
        self.tail()

    @work(thread=True, exclusive=True, exit_on_error=False, name="load run", group="choices")
    def load_choices(self) -> None:
        run = self.app.plane.get_run(self.run_name, reconcile=False)
        self.app.call_from_thread(self._fill, run)

    def _fill(self, run) -> None:
        res = self.query_one("#log-resumption", Select)
        res.set_options([("latest", LATEST)] + [(f"#{r.index} {r.cluster}", r.index) for r in run.resumptions])
        res.value = self.resumption
        devices = max([r.devices for r in run.resumptions] + [run.devices])
        rank = self.query_one("#log-rank", Select)
        rank.set_options([("all ranks", ALL)] + [(f"rank {i}", i) for i in range(devices)])
        rank.value = self.rank

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.value is Select.BLANK:
            return
        value = int(event.value)
        if event.select.id == "log-resumption" and value != self.resumption:
            self.resumption = value
        elif event.select.id == "log-rank" and value != self.rank:
            self.rank = value
        else:
            return
        self.restart()

    def restart(self) -> None:
        self.generation += 1
        self.query_one(Log).clear()
        self.tail()

    def _write(self, generation: int, lines: list[str]) -> None:
        if generation == self.generation:
            self.query_one(Log).write_lines(lines)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self.query_one("#log-state", Label).update("following" if self.follow else "paused")
        if self.follow:
            self.restart()

    def action_clear(self) -> None:
        self.query_one(Log).clear()

    @work(thread=True, exclusive=True, exit_on_error=False, name="follow logs", group="logs")
    def tail(self) -> None:
        plane, worker, generation = self.app.plane, get_current_worker(), self.generation
        shown, current = 0, None
        rank = None if self.rank == ALL else self.rank
        while not worker.is_cancelled:
            run = plane.get_run(self.run_name)
            if not run.resumptions:
                idx = None
            else:
                idx = run.latest.index if self.resumption == LATEST else self.resumption
            if idx != current:
                if current is not None:
                    self.app.call_from_thread(self._write, generation,
                                              [f"--- resumption {idx} on {run.resumptions[idx].cluster} ---"])
                current, shown = idx, 0
            if idx is not None:
                lines = fold_paused_exit(list(plane.logs(self.run_name, resumption=idx, rank=rank, follow=False)))
                if len(lines) > shown and not worker.is_cancelled:
                    self.app.call_from_thread(self._write, generation, lines[shown:])
                    shown = len(lines)
            active = run.status in ACTIVE_STATUSES
            latest = run.latest.index if run.latest else None
            if not self.follow or (not active and (self.resumption != LATEST or idx == latest)):
                self.app.call_from_thread(self.query_one("#log-state", Label).update,
                                          f"{run.status} (end of log)" if not active else "paused")
                return
            deadline = time.monotonic() + self.app.refresh_interval
            while time.monotonic() < deadline:
                if worker.is_cancelled:
                    return
                time.sleep(0.1)
