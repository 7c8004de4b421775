"""Run actions shared by the Runs table and the Run details screen: logs, pause, resume, move,
delete. `selected_run()` names the run; `after_change()` refreshes whatever the screen shows.
Every control-plane call is a named worker; the same functions the CLI uses do the work."""

from __future__ import annotations

from textual import work
from textual.binding import Binding

from .dialogs import ConfirmDialog

RUN_BINDINGS = [
    Binding("l", "logs", "Logs"),
    Binding("p", "pause", "Pause"),
    Binding("r", "resume", "Resume"),
    Binding("m", "move", "Move"),
    Binding("ctrl+d", "delete", "Delete"),
]
RUN_MUTATING = frozenset({"pause", "resume", "move", "delete"})


class RunActions:
    def selected_run(self) -> str | None:
        raise NotImplementedError

    def after_change(self) -> None:
        """Called on the UI thread after an action changed the run."""

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
        if not self.mutating_allowed() or (name := self.selected_run()) is None:
            return
        self.app.push_screen(ConfirmDialog(f"Pause run {name}? It checkpoints and stops; resume it anywhere.",
                                           confirm="Pause"), lambda ok: ok and self.pause_run(name))

    @work(thread=True, exclusive=True, exit_on_error=False, name="pause run", group="action")
    def pause_run(self, name: str) -> None:
        info = self.app.plane.stop_run(name, graceful=True)
        self._done(f"run {name} {info.status}")

    def _placement(self, verb: str, then) -> None:
        if not self.mutating_allowed() or (name := self.selected_run()) is None:
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

        info = self.app.plane.runs.move(name, cluster=cluster, gpus=gpus, nodes=nodes, timeout=600, on_step=step)
        self._done(f"run {name} moved to {info.cluster} (resumption {info.latest.index})")

    def action_delete(self) -> None:
        if not self.mutating_allowed() or (name := self.selected_run()) is None:
            return
        self.app.push_screen(ConfirmDialog(f"Delete run {name}? It is stopped and its logs are removed.",
                                           confirm="Delete", destructive=True),
                             lambda ok: ok and self.delete_run(name))

    @work(thread=True, exclusive=True, exit_on_error=False, name="delete run", group="action")
    def delete_run(self, name: str) -> None:
        self.app.plane.delete_run(name)
        self.app.call_from_thread(self.notify, f"deleted run {name}")
        self.app.call_from_thread(self.after_delete, name)
