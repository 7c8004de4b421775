"""Run actions shared by the Runs table and the Run details screen: logs, pause, resume, move,
delete. `selected_run()` names the run; `after_change()` refreshes whatever the screen shows.
Every control-plane call is a named worker; the same functions the CLI uses do the work."""

from __future__ import annotations

from textual import work
from textual.binding import Binding

from foundry.app.control import ACTIVE_STATUSES, RESUMABLE_STATUSES

from .dialogs import ConfirmDialog

RUN_BINDINGS = [
    Binding("l", "logs", "Logs"),
    Binding("p", "pause", "Pause"),
    Binding("r", "resume", "Resume"),
    Binding("m", "move", "Move"),
    Binding("ctrl+d", "delete", "Delete"),
]
RUN_MUTATING = frozenset({"pause", "resume", "move", "delete"})


def refusal(action: str, name: str, status: str | None) -> str | None:
    """Why `action` makes no sense for a run in `status` (one line, with what to do), else None.

    The control plane refuses these too; saying it here, before any dialog, means a confirm is
    only ever offered for something that can happen."""
    if status is None:
        return None
    if action == "pause" and (status not in ACTIVE_STATUSES or status == "stopping"):
        if status == "stopping":
            return f"run {name} is already stopping"
        return f"run {name} is {status}: there is nothing to pause" + (
            " (r resumes it)" if status in RESUMABLE_STATUSES else "")
    if action == "resume" and status not in RESUMABLE_STATUSES:
        if status in ACTIVE_STATUSES:
            return f"run {name} is {status}, not stopped: m moves it elsewhere, p pauses it"
        return f"run {name} is {status}: there is nothing left to resume (n starts a new run)"
    if action == "move" and status not in (*ACTIVE_STATUSES, *RESUMABLE_STATUSES):
        return f"run {name} is {status}: only running, paused, stopped, failed or lost runs move"
    return None


class RunActions:
    def selected_run(self) -> str | None:
        raise NotImplementedError

    def run_status(self, name: str) -> str | None:
        """The run's status as this screen last showed it (None: unknown, let the plane decide)."""
        return None

    def after_change(self) -> None:
        """Called on the UI thread after an action changed the run."""

    def _acting_on(self, action: str) -> str | None:
        """The selected run, when `action` is allowed and makes sense for its state (else says why)."""
        if not self.mutating_allowed() or (name := self.selected_run()) is None:
            return None
        if (reason := refusal(action, name, self.run_status(name))) is not None:
            self.notify(reason, severity="warning")
            return None
        return name

    def after_delete(self, name: str) -> None:
        self.after_change()

    def _done(self, message: str) -> None:
        self.app.call_from_thread(self.notify, message)
        self.app.call_from_thread(self.after_change)

    def action_logs(self) -> None:
        if (name := self.selected_run()) is not None:
            from .logs import LogsScreen

            self.app.push_screen(LogsScreen(name))

    def action_pause(self) -> None:
        if (name := self._acting_on("pause")) is None:
            return
        self.app.push_screen(ConfirmDialog(f"Pause run {name}? It checkpoints and stops; resume it anywhere.",
                                           confirm="Pause"), lambda ok: ok and self.pause_run(name))

    @work(thread=True, exclusive=True, exit_on_error=False, name="pause run", group="action")
    def pause_run(self, name: str) -> None:
        info = self.app.plane.stop_run(name, graceful=True)
        self._done(f"run {name} {info.status}")

    def _placement(self, verb: str, then) -> None:
        if (name := self._acting_on(verb.lower())) is None:
            return
        from .forms import PlacementForm

        self.app.push_screen(PlacementForm(name, verb), lambda result: result and then(name, *result))

    def action_resume(self) -> None:
        self._placement("Resume", self.resume_run)

    def action_move(self) -> None:
        self._placement("Move", self.move_run)

    @work(thread=True, exclusive=True, exit_on_error=False, name="resume run", group="action")
    def resume_run(self, name: str, cluster: str, gpus: int | None, nodes: int | None) -> None:
        info = self.app.plane.resume_run(name, cluster=cluster, gpus=gpus, nodes=nodes)
        self._done(f"run {name} resumed on {info.cluster} (resumption {info.latest.index}, {info.devices} device(s))")

    @work(thread=True, exclusive=True, exit_on_error=False, name="move run", group="action")
    def move_run(self, name: str, cluster: str, gpus: int | None, nodes: int | None) -> None:
        def step(message: str) -> None:
            self.app.call_from_thread(self.notify, message, timeout=3)
            self.app.call_from_thread(self.after_change)

        info = self.app.plane.move_run(name, cluster=cluster, gpus=gpus, nodes=nodes, timeout=600, on_step=step)
        self._done(f"run {name} moved to {info.cluster} (resumption {info.latest.index})")

    def action_delete(self) -> None:
        if (name := self._acting_on("delete")) is None:
            return
        running = self.run_status(name) in ACTIVE_STATUSES
        self.app.push_screen(ConfirmDialog(f"Delete run {name}? " + (
            f"It is {self.run_status(name)}: it is killed now (p pauses it at a checkpoint instead), "
            "and its logs are removed." if running else "It is stopped and its logs are removed."),
                                           confirm="Delete", destructive=True),
                             lambda ok: ok and self.delete_run(name))

    @work(thread=True, exclusive=True, exit_on_error=False, name="delete run", group="action")
    def delete_run(self, name: str) -> None:
        self.app.plane.delete_run(name)
        self.app.call_from_thread(self.notify, f"deleted run {name}")
        self.app.call_from_thread(self.after_delete, name)
