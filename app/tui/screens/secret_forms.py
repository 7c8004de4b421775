"""Secret forms: add a secret of any registered kind (secret fields are password inputs, file fields
take a path whose content is stored, as `foundry create secret` does), and test one against a bucket.

Values go from the inputs straight to the control plane; nothing echoes them back."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Select

from foundry.plugins.errors import ConfigError, FoundryError

from ..errors import one_line
from .base import FoundryModal


def read_values(stype, raw: dict[str, str]) -> dict[str, str]:
    """Field values as the CLI builds them: from_file fields are paths whose content is stored."""
    values = {}
    for field in stype.fields:
        given = raw.get(field.name, "").strip() if field.from_file or not field.secret else raw.get(field.name, "")
        if not given:
            continue
        if field.from_file:
            path = Path(given).expanduser()
            try:
                given = path.read_text()
            except OSError as exc:
                raise ConfigError(f"cannot read {field.name} file {str(path)!r}: {exc.strerror}") from None
        values[field.name] = given
    return values


class SecretForm(FoundryModal[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self) -> None:
        super().__init__(classes="dialog-screen")
        self.types: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form wide"):
            yield Label("Add a secret (values are never shown again)", classes="dialog-title")
            with Horizontal(classes="form-row"):
                yield Input(placeholder="name (e.g. r2-creds)", id="secret-name")
                yield Select([], id="secret-kind", prompt="kind", allow_blank=True)
            yield Label("", id="kind-help")
            yield VerticalScroll(id="secret-fields")
            yield Label("", id="form-error", classes="form-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Save", id="save", variant="primary")

    def on_mount(self) -> None:
        self.types = {t.kind: t for t in self.app.plane.secret_types()}
        self.query_one("#secret-kind", Select).set_options([(k, k) for k in sorted(self.types)])
        self.query_one("#secret-name", Input).focus()

    async def on_select_changed(self, event: Select.Changed) -> None:
        box = self.query_one("#secret-fields", VerticalScroll)
        await box.remove_children()
        stype = self.types.get(event.value) if isinstance(event.value, str) else None
        if stype is None:
            return
        self.query_one("#kind-help", Label).update(stype.description)
        widgets = []
        for field in stype.fields:
            label = field.help + (" (a path)" if field.from_file else "") + ("" if field.required else " [optional]")
            widgets.append(Input(placeholder=label, id=f"field-{field.name}",
                                 password=field.secret and not field.from_file))
        await box.mount_all(widgets)
        # what is typed next goes into the first field, which says what it is (a key: masked), never
        # into a visible field it was not meant for (the name, or the Select's type-to-search)
        if widgets:
            widgets[0].focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        self.submit()

    def submit(self) -> None:
        kind = self.query_one("#secret-kind", Select).value
        name = self.query_one("#secret-name", Input).value.strip()
        error = self.query_one("#form-error", Label)
        if not isinstance(kind, str) or not name:   # no kind chosen: Select.NULL
            error.update("give a name and choose a kind")
            return
        raw = {inp.id.removeprefix("field-"): inp.value for inp in self.query("#secret-fields Input")}
        error.update("saving…")
        self.save(name, str(kind), raw)

    @work(thread=True, exclusive=True, exit_on_error=False, name="create secret")
    def save(self, name: str, kind: str, raw: dict[str, str]) -> None:
        try:
            info = self.app.plane.create_secret(name, kind, read_values(self.types[kind], raw))
        except FoundryError as exc:
            self.app.call_from_thread(self.query_one("#form-error", Label).update, one_line(exc))
            return
        self.app.call_from_thread(self.notify, f"created {info.kind} secret {info.name}")
        self.app.call_from_thread(self.dismiss, info.name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class BucketTestForm(FoundryModal[None]):
    """List a few keys of a bucket with the secret's credentials (in a scoped environment)."""

    BINDINGS = [Binding("escape", "cancel", "Close")]

    def __init__(self, secret: str):
        super().__init__(classes="dialog-screen")
        self.secret = secret

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label(f"Test secret {self.secret} against a bucket", classes="dialog-title")
            yield Input(placeholder="s3://bucket/prefix, gs://…, oci://…", id="bucket-url")
            yield Label("", id="test-result", classes="form-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="cancel")
                yield Button("Test", id="test", variant="primary")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._start()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self._start()

    def _start(self) -> None:
        url = self.query_one("#bucket-url", Input).value.strip()
        if not url:
            self.query_one("#test-result", Label).update("give a bucket URL")
            return
        self.query_one("#test-result", Label).update("connecting…")
        self.run_test(url)

    @work(thread=True, exclusive=True, exit_on_error=False, name="test secret")
    def run_test(self, url: str) -> None:
        try:
            keys = self.app.plane.check_secret_access(self.secret, url)
        except FoundryError as exc:
            text = "failed: " + one_line(exc)
        else:
            text = f"ok: {url} is reachable ({len(keys)} key(s) listed" + (f", e.g. {keys[0]})" if keys else ")")
        self.app.call_from_thread(self.query_one("#test-result", Label).update, text)

    def action_cancel(self) -> None:
        self.dismiss(None)
