"""FoundryApp: modes (one per view), global bindings, the one worker-failure handler, readonly.

Attributes down: screens read `app.plane` (a ControlPlane), `app.readonly`, `app.clock` and
`app.refresh_interval`; they never build their own control plane.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from .commands import FoundryCommands
from .errors import one_line

REPEAT_AFTER = 30.0
VIEWS = {"runs": "Runs", "clusters": "Clusters", "datasets": "Datasets", "secrets": "Credentials"}
ALIASES = {"credentials": "secrets", "creds": "secrets", "run": "runs", "cluster": "clusters",
           "dataset": "datasets", "data": "datasets", "secret": "secrets"}


def _modes() -> dict:
    from .screens.clusters import ClustersScreen
    from .screens.datasets import DatasetsScreen
    from .screens.runs import RunsScreen
    from .screens.secrets import SecretsScreen

    return {"runs": RunsScreen, "clusters": ClustersScreen, "datasets": DatasetsScreen, "secrets": SecretsScreen}


class FoundryApp(App):
    TITLE = "Foundry"
    CSS_PATH = "foundry.tcss"
    COMMANDS = App.COMMANDS | {FoundryCommands}
    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("colon", "jump", "Jump", key_display=":"),
        Binding("1", "switch_mode('runs')", "Runs", show=False),
        Binding("2", "switch_mode('clusters')", "Clusters", show=False),
        Binding("3", "switch_mode('datasets')", "Datasets", show=False),
        Binding("4", "switch_mode('secrets')", "Credentials", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, plane, *, readonly: bool = False, refresh_interval: float = 2.0,
                 clock: Callable[[], float] = time.time):
        self.MODES = _modes()
        super().__init__()
        self.plane = plane
        self.readonly = readonly
        self.refresh_interval = refresh_interval
        self.clock = clock
        self._last_failure: tuple | None = None
        if readonly:
            self.sub_title = "read-only"

    def on_mount(self) -> None:
        self.switch_mode("runs")

    # --- one handler for every failed worker ----------------------------------------------------
    def report_failure(self, error: BaseException | None, where: str = "") -> None:
        """A worker's failure as a notification: FoundryError's message and hint, one line each.

        The same failure repeating (a periodic refresh against an unreachable provider) is shown
        once per REPEAT_AFTER seconds, not on every refresh."""
        text = one_line(error)
        now = time.monotonic()
        if self._last_failure and self._last_failure[0] == (where, text) and now - self._last_failure[1] < REPEAT_AFTER:
            return
        self._last_failure = ((where, text), now)
        self.notify(text, title=f"{where} failed" if where else "Error", severity="error", timeout=8)

    def deny_readonly(self) -> bool:
        if self.readonly:
            self.notify("foundry-tui is read-only (--readonly)", severity="warning")
        return self.readonly

    # --- navigation -----------------------------------------------------------------------------
    def action_jump(self) -> None:
        from .screens.dialogs import JumpDialog

        def go(view: str | None) -> None:
            if view:
                self.switch_mode(view)

        self.push_screen(JumpDialog(VIEWS), go)

    def action_help(self) -> None:
        from .screens.dialogs import HelpDialog

        if not isinstance(self.screen, HelpDialog):
            self.push_screen(HelpDialog(self.screen))

    def resolve_view(self, text: str) -> str | None:
        text = text.strip().lower().lstrip(":")
        text = ALIASES.get(text, text)
        if text in VIEWS:
            return text
        matches = [v for v in VIEWS if v.startswith(text)] if text else []
        return matches[0] if len(matches) == 1 else None

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for view, title in VIEWS.items():
            yield SystemCommand(f"Go to {title}", f"switch to the {title} view (:{view})",
                                lambda v=view: self.switch_mode(v))
