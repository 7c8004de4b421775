"""Run forms: where to resume/move a run (validated like `foundry resume`), and a new run from a
YAML file with a dry-run preview (`foundry run --dry-run`)."""

from __future__ import annotations

import yaml
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static

from foundry.plugins.errors import FoundryError

from ..errors import one_line
from .base import FoundryModal


def parse_count(text: str, what: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what}: must be a whole number (got {text!r})") from None
    if value < (0 if what == "gpus" else 1):
        raise ValueError(f"{what}: must be >= {0 if what == 'gpus' else 1} (got {value})")
    return value


class PlacementForm(FoundryModal[tuple | None]):
    """Cluster + device count + nodes for a resume or a move; dismisses with (cluster, gpus, nodes)
    only after the control plane accepted the placement (spec re-validated, provider dry run)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, run_name: str, verb: str = "Resume"):
        super().__init__(classes="dialog-screen")
        self.run_name, self.verb = run_name, verb

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label(f"{self.verb} run {self.run_name}", classes="dialog-title")
            yield Label("cluster", id="cluster-label")
            # a disabled placeholder while loading, replaced by a Select with no blank choice
            yield Select([], id="cluster", prompt="(loading clusters)", disabled=True)
            with Horizontal(classes="form-row"):
                yield Label("devices (gpus, total)")
                yield Label("nodes")
            with Horizontal(classes="form-row"):
                yield Input(placeholder="devices (gpus)", id="gpus", type="integer")
                yield Input(placeholder="nodes", id="nodes", type="integer")
            yield Label("", id="form-error", classes="form-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(self.verb, id="ok", variant="primary")

    def on_mount(self) -> None:
        self.load_choices()

    @work(thread=True, exclusive=True, exit_on_error=False, name="load clusters")
    def load_choices(self) -> None:
        plane = self.app.plane
        clusters = [c.name for c in plane.list_clusters()]
        run = plane.get_run(self.run_name, reconcile=False)
        self.app.call_from_thread(self._fill, clusters, run)

    async def _fill(self, clusters: list[str], run) -> None:
        value = run.cluster if run.cluster in clusters else clusters[0]
        await self.query_one("#cluster", Select).remove()
        label = self.query_one("#cluster-label", Label)
        select = Select([(c, c) for c in clusters], id="cluster", value=value, allow_blank=False)
        await label.parent.mount(select, after=label)
        select.focus()  # where the form starts, as before it loaded
        self.query_one("#gpus", Input).value = str(run.devices)
        self.query_one("#nodes", Input).value = str(run.nodes)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        self.submit()

    def submit(self) -> None:
        error = self.query_one("#form-error", Label)
        cluster = self.query_one("#cluster", Select).value
        if not isinstance(cluster, str):   # still loading (Select.NULL)
            error.update("choose a cluster")
            return
        try:
            gpus = parse_count(self.query_one("#gpus", Input).value, "gpus")
            nodes = parse_count(self.query_one("#nodes", Input).value, "nodes")
        except ValueError as exc:
            error.update(str(exc))
            return
        error.update("checking…")
        self.validate(str(cluster), gpus, nodes)

    @work(thread=True, exclusive=True, exit_on_error=False, name="check placement")
    def validate(self, cluster: str, gpus: int | None, nodes: int | None) -> None:
        try:
            self.app.plane.check_placement(self.run_name, cluster, gpus, nodes)
        except FoundryError as exc:
            self.app.call_from_thread(self.query_one("#form-error", Label).update, one_line(exc))
            return
        self.app.call_from_thread(self.dismiss, (cluster, gpus, nodes))

    def action_cancel(self) -> None:
        self.dismiss(None)


def dry_run_text(plan) -> str:
    """The same sections `foundry run --dry-run` prints."""
    parts = ["# normalized spec", yaml.safe_dump(plan.spec, sort_keys=False).rstrip(),
             f"# plan ({plan.provider} on cluster {plan.cluster})", plan.summary, "# environment"]
    parts += [f"{k}={v}" for k, v in sorted(plan.env.items()) if "\n" not in v]
    if plan.secret_files:
        parts += ["# secret files", *plan.secret_files]
    for key, text in plan.artifacts.items():
        parts += [f"# {key}", text]
    return "\n".join(parts)


class NewRunForm(FoundryModal[str | None]):
    """A run from a YAML file: Preview shows the dry run; Launch creates the run (dismisses its name)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form wide"):
            yield Label("New run from a run spec (YAML)", classes="dialog-title")
            yield Input(placeholder="path/to/run.yaml", id="spec-path")
            yield Label("", id="form-error", classes="form-error")
            with VerticalScroll(id="preview-scroll"):
                yield Static("", id="preview", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Preview", id="preview-button")
                yield Button("Launch", id="launch", variant="primary")

    def _path(self) -> str | None:
        path = self.query_one("#spec-path", Input).value.strip()
        if not path:
            self.query_one("#form-error", Label).update("give the path of a run spec")
            return None
        return path

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter previews; Enter again on the previewed path launches it."""
        if (path := self._path()) is None:
            return
        if getattr(self, "previewed", None) == path:
            self.query_one("#form-error", Label).update("launching…")
            self.launch(path)
        else:
            self.preview(path)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        elif (path := self._path()) is not None:
            self.query_one("#form-error", Label).update("working…")
            (self.preview if event.button.id == "preview-button" else self.launch)(path)

    @work(thread=True, exclusive=True, exit_on_error=False, name="dry run")
    def preview(self, path: str) -> None:
        try:
            text = dry_run_text(self.app.plane.dry_run(path))
        except FoundryError as exc:
            self.app.call_from_thread(self.query_one("#form-error", Label).update, one_line(exc))
            return
        self.previewed = path
        self.app.call_from_thread(self.query_one("#form-error", Label).update,
                                  "dry run: nothing launched (Enter again, or Launch, launches it)")
        self.app.call_from_thread(self.query_one("#preview", Static).update, text)

    @work(thread=True, exclusive=True, exit_on_error=False, name="create run")
    def launch(self, path: str) -> None:
        try:
            info = self.app.plane.create_run(path)
        except FoundryError as exc:
            self.app.call_from_thread(self.query_one("#form-error", Label).update, one_line(exc))
            return
        self.app.call_from_thread(self.notify, f"run {info.name} launched on {info.cluster}")
        self.app.call_from_thread(self.dismiss, info.name)

    def action_cancel(self) -> None:
        self.dismiss(None)
