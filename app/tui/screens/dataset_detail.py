"""One dataset: shards, samples, bytes, columns and compression, and a sample browser that decodes
samples (text, numbers, arrays, images as a preview). `]` / `[` page through the samples."""

from __future__ import annotations

from rich.table import Table
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static


from .. import format as fmt
from ..widgets.datasets import SampleView, short
from .base import FoundryScreen

PAGE = 20


class DatasetScreen(FoundryScreen):
    TITLE = "Dataset"
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("right_square_bracket", "page(1)", "Next", key_display="]"),
                Binding("left_square_bracket", "page(-1)", "Prev", key_display="["), Binding("v", "verify", "Verify")]

    def __init__(self, name: str, url: str, secret: str | None = None):
        super().__init__()
        self.dataset_name, self.url, self.secret = name, url, secret
        self.start, self.total = 0, 0
        self.samples: list[dict] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("reading index.json…", id="dataset-summary")
        with Horizontal(id="sample-browser"):
            yield DataTable(id="samples", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="sample-pane"):
                yield SampleView("", id="sample-view")
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title(f"Dataset: {self.dataset_name}")
        self.load_summary()

    @work(thread=True, exclusive=True, exit_on_error=False, name="inspect dataset", group="summary")
    def load_summary(self) -> None:
        summary = self.app.plane.dataset_summary(self.url, secret=self.secret)
        self.app.call_from_thread(self._show_summary, summary)
        self.app.call_from_thread(self.load_page, 0)

    def _show_summary(self, s) -> None:
        self.total = s.samples
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold")
        table.add_column()
        table.add_row("url", s.url)
        table.add_row("shards", f"{s.shards} ({s.format})   samples {s.samples}   size {fmt.size(s.bytes)}"
                                f" (raw {fmt.size(s.raw_bytes)})   compression {s.compression or 'none'}"
                                f"   hashes {', '.join(s.hashes) or 'none'}")
        table.add_row("columns", ", ".join(f"{k}: {v}" for k, v in s.columns.items()) or "-")
        self.query_one("#dataset-summary", Static).update(table)
        samples = self.query_one("#samples", DataTable)
        samples.clear(columns=True)
        samples.add_column("#", key="#")
        for name in s.columns:
            samples.add_column(name, key=name)

    @work(thread=True, exclusive=True, exit_on_error=False, name="read samples", group="samples")
    def load_page(self, start: int) -> None:
        samples = self.app.plane.dataset_samples(self.url, start, PAGE, secret=self.secret)
        self.app.call_from_thread(self._show_page, start, samples)

    def _show_page(self, start: int, samples: list[dict]) -> None:
        self.start, self.samples = start, samples
        table = self.query_one("#samples", DataTable)
        table.clear()
        for i, sample in enumerate(samples):
            table.add_row(str(start + i), *(short(sample.get(str(c.value))) for c in list(table.columns)[1:]),
                          key=str(start + i))
        if samples:
            self.query_one(SampleView).show(start, samples[0])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        i = event.cursor_row
        if 0 <= i < len(self.samples):
            self.query_one(SampleView).show(self.start + i, self.samples[i])

    def action_page(self, delta: int) -> None:
        start = self.start + delta * PAGE
        if 0 <= start < max(self.total, 1):
            self.load_page(start)

    def action_verify(self) -> None:
        from .dataset_forms import VerifyDialog

        self.app.push_screen(VerifyDialog(self.url, self.secret))
