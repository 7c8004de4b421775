"""Dataset dialogs: register a URL, convert JSONL/CSV/an image folder into MDS with a progress bar,
verify every shard's hashes with a progress bar."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, ProgressBar, Select

from foundry.plugins.errors import FoundryError

from ..errors import one_line
from .base import FoundryModal

COMPRESSIONS = [("none", ""), ("zstd", "zstd"), ("gzip", "gz"), ("bz2", "bz2")]


class AddDatasetForm(FoundryModal[bool]):
    """URL, name and the stored secret the dataset is read with (`foundry dataset add --secret`):
    a private bucket needs one, and choosing it here is the whole fix (no CLI round trip)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label("Register a dataset", classes="dialog-title")
            yield Input(placeholder="s3://bucket/path, gs://…, or a local folder", id="dataset-url")
            yield Input(placeholder="name (optional)", id="dataset-name")
            yield Label("read with the stored secret (a private bucket needs one)", id="secret-label")
            yield Select([], id="dataset-secret", prompt="no secret (public, or credentials in the environment)")
            yield Label("", id="form-error", classes="form-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Add", id="add", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#dataset-url", Input).focus()
        self.load_secrets()

    @work(thread=True, exclusive=True, exit_on_error=False, name="load secrets")
    def load_secrets(self) -> None:
        secrets = self.app.plane.list_secrets()
        options = [(f"{s.name} ({s.kind})", s.name) for s in secrets]
        self.app.call_from_thread(self.query_one("#dataset-secret", Select).set_options, options)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(False)
            return
        self.submit()

    def submit(self) -> None:
        url = self.query_one("#dataset-url", Input).value.strip()
        if not url:
            self.query_one("#form-error", Label).update("give the dataset's URL or folder")
            return
        secret = self.query_one("#dataset-secret", Select).value
        self.query_one("#form-error", Label).update("checking…")
        self.add(url, self.query_one("#dataset-name", Input).value.strip() or None,
                 secret if isinstance(secret, str) else None)   # not chosen: Select.NULL

    @work(thread=True, exclusive=True, exit_on_error=False, name="add dataset")
    def add(self, url: str, name: str | None, secret: str | None) -> None:
        try:
            entry = self.app.plane.add_dataset(url, name, secret)
        except FoundryError as exc:
            self.app.call_from_thread(self.query_one("#form-error", Label).update, one_line(exc))
            return
        self.app.call_from_thread(self.notify, f"registered dataset {entry.name}"
                                  + (f" (read with secret {secret})" if secret else ""))
        self.app.call_from_thread(self.dismiss, True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class ConvertForm(FoundryModal[bool]):
    """Convert, then register the result (dismisses True when a dataset was added)."""

    BINDINGS = [Binding("escape", "cancel", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form wide"):
            yield Label("Convert JSONL / CSV / an image folder into MDS", classes="dialog-title")
            yield Input(placeholder="source: data.jsonl, data.csv or images/ (one folder per class)", id="convert-src")
            yield Input(placeholder="destination: s3://bucket/mds/train or a local folder", id="convert-dst")
            yield Select(COMPRESSIONS, value="", allow_blank=False, id="convert-compression")
            yield ProgressBar(total=1, id="convert-progress", show_eta=False)
            yield Label("", id="form-error", classes="form-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="cancel")
                yield Button("Convert", id="convert", variant="primary")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the source goes to the destination; Enter in the destination converts."""
        if event.input.id == "convert-src":
            self.query_one("#convert-dst", Input).focus()
        else:
            self.start(self.query_one("#convert", Button))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(False)
        else:
            self.start(event.button)

    def start(self, button: Button) -> None:
        if button.disabled:
            return
        src = self.query_one("#convert-src", Input).value.strip()
        dst = self.query_one("#convert-dst", Input).value.strip()
        if not src or not dst:
            self.query_one("#form-error", Label).update("give a source and a destination")
            return
        self.query_one("#form-error", Label).update("converting…")
        button.disabled = True
        self.convert(src, dst, str(self.query_one("#convert-compression", Select).value) or None)

    def _progress(self, done: int, total: int) -> None:
        self.app.call_from_thread(self.query_one(ProgressBar).update, total=total, progress=done)

    @work(thread=True, exclusive=True, exit_on_error=False, name="convert dataset")
    def convert(self, src: str, dst: str, compression: str | None) -> None:
        try:
            plane = self.app.plane
            summary = plane.convert_dataset(src, dst, compression=compression, progress=self._progress)
            plane.add_dataset(summary.url)
        except FoundryError as exc:
            self.app.call_from_thread(self.query_one("#form-error", Label).update, one_line(exc))
            return
        finally:
            self.app.call_from_thread(setattr, self.query_one("#convert", Button), "disabled", False)
        self.app.call_from_thread(self.query_one("#form-error", Label).update,
                                  f"done: {summary.samples} samples in {summary.shards} shard(s) at {summary.url}")
        self.app.call_from_thread(self.notify, f"converted {summary.samples} samples into {summary.url}")
        self.converted = True

    def action_cancel(self) -> None:
        self.dismiss(getattr(self, "converted", False))


class VerifyDialog(FoundryModal[None]):
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, url: str, secret: str | None = None):
        super().__init__(classes="dialog-screen")
        self.url, self.secret = url, secret

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label(f"Verify {self.url}", classes="dialog-title")
            yield ProgressBar(total=1, id="verify-progress", show_eta=False)
            yield Label("checking every shard's hashes…", id="verify-result", classes="form-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="close", variant="primary")

    def on_mount(self) -> None:
        self.verify()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    @work(thread=True, exclusive=True, exit_on_error=False, name="verify dataset")
    def verify(self) -> None:
        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(self.query_one(ProgressBar).update, total=total, progress=done)

        problems = self.app.plane.dataset_problems(self.url, progress, secret=self.secret)
        text = "ok: every hash matches" if not problems else f"{len(problems)} problem(s): " + "; ".join(problems[:5])
        self.app.call_from_thread(self.query_one("#verify-result", Label).update, text)

    def action_close(self) -> None:
        self.dismiss(None)
