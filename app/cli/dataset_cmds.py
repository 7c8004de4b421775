"""`foundry dataset convert | inspect | verify`: parse, call the control plane (which reads and writes
with `--secret`, a stored secret, as the TUI does), print through the sink."""

from __future__ import annotations

import json
from contextlib import contextmanager

import typer

from .groups import group
from .output import sink

_SECRET_HELP = "A stored secret to read and write storage with (foundry get secrets)."


def _plane():
    from foundry.app.control import ControlPlane

    return ControlPlane()


def _json(flag: bool) -> None:
    sink.json_mode = sink.json_mode or flag


@contextmanager
def _progress(description: str, unit: str):
    """Yields a progress(done, total) callback: a rich bar on a terminal, nothing otherwise."""
    if not sink.interactive:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                  TimeElapsedColumn(), console=sink.err, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        yield update


_TOKENIZING = "Tokenizing (LLM Foundry's --concat_tokens)"


def convert_cmd(
    src: str = typer.Argument(..., help="A .jsonl, .csv or .tsv file, or a folder with one sub-folder per class "
                             "(with --tokenizer: .jsonl/.txt files, a folder of them, or a saved HF dataset)."),
    dst: str = typer.Argument(..., help="Output: a local folder or a storage URL (s3://, gs://, file://, ...)."),
    workers: int = typer.Option(1, "--workers", "-w", help="Parallel worker processes."),
    compression: str = typer.Option(None, "--compression", help="zstd, zstd:LEVEL, gz, bz2, br, snappy."),
    size_limit: str = typer.Option("64mb", "--size-limit", help="Shard size limit (bytes or 64mb, 100kb...)."),
    hashes: str = typer.Option(None, "--hashes",
                               help="Comma-separated hash algorithms (default xxh3_64; '' for none)."),
    columns: str = typer.Option(None, "--columns", help="NAME:ENCODING,... (default: inferred)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing dataset at DST."),
    tokenizer: str = typer.Option(None, "--tokenizer", help="Tokenize text with this tokenizer.json (or its folder).",
                                  rich_help_panel=_TOKENIZING),
    concat_tokens: int = typer.Option(None, "--concat-tokens", help="Tokens per sample (with --tokenizer).",
                                      rich_help_panel=_TOKENIZING),
    eos_text: str = typer.Option("", "--eos-text", help="Text appended to every document, e.g. '<|endoftext|>'.",
                                 rich_help_panel=_TOKENIZING),
    bos_text: str = typer.Option("", "--bos-text", help="Text put before every document.",
                                 rich_help_panel=_TOKENIZING),
    no_wrap: bool = typer.Option(False, "--no-wrap", help="Drop the rest of a document instead of carrying it over.",
                                 rich_help_panel=_TOKENIZING),
    keep_remainder: bool = typer.Option(False, "--keep-remainder", help="Write the last, shorter sample too "
                                        "(dropped by default).", rich_help_panel=_TOKENIZING),
    text_field: str = typer.Option("text", "--text-field", help="The JSON field or dataset column holding the text.",
                                   rich_help_panel=_TOKENIZING),
    split: str = typer.Option(None, "--split", help="The split of a saved Hugging Face DatasetDict.",
                              rich_help_panel=_TOKENIZING),
    secret: str = typer.Option(None, "--secret", help=_SECRET_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Convert JSONL, CSV/TSV or an image folder into an MDS dataset, or tokenize text (--tokenizer)."""
    from foundry.plugins.errors import ConfigError

    _json(json_out)
    algos = None if hashes is None else [h.strip() for h in hashes.split(",") if h.strip()]
    if (tokenizer is None) != (concat_tokens is None):
        raise ConfigError("--tokenizer and --concat-tokens go together",
                          hint="e.g. --tokenizer tokenizer.json --concat-tokens 2048")
    if tokenizer is not None:
        if workers != 1 or columns:
            raise ConfigError("--workers and --columns do not apply when tokenizing",
                              hint="the tokenizer uses its own threads; the column is always tokens:ndarray:int32")
        text = dict(eos_text=eos_text, bos_text=bos_text, no_wrap=no_wrap, keep_remainder=keep_remainder,
                    text_field=text_field, split=split)
        with _progress("tokenizing", "samples") as progress:
            result = _plane().tokenize_dataset(src, dst, tokenizer, concat_tokens, text=text, secret=secret,
                                               compression=compression, hashes=algos, size_limit=size_limit,
                                               exist_ok=overwrite, progress=progress)
    else:
        with _progress("converting", "samples") as progress:
            result = _plane().convert_files(src, dst, columns=columns, secret=secret, compression=compression,
                                            hashes=algos, size_limit=size_limit, workers=workers,
                                            exist_ok=overwrite, progress=progress)
    data = result.as_dict()
    if not sink.json_mode:
        data["columns"] = ", ".join(f"{k}:{v}" for k, v in result.columns.items())
    sink.emit(data)


def inspect_cmd(
    url: str = typer.Argument(..., help="The dataset's folder or URL (where index.json is)."),
    samples: int = typer.Option(3, "--samples", "-n", help="How many samples to decode and show."),
    allow_unsafe_types: bool = typer.Option(False, "--allow-unsafe-types", help="Decode pkl columns too."),
    secret: str = typer.Option(None, "--secret", help=_SECRET_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Shards, samples, bytes, columns, compression and a few decoded samples."""
    _json(json_out)
    summary = _plane().inspect_dataset(url, samples=samples, allow_unsafe_types=allow_unsafe_types, secret=secret)
    if sink.json_mode:
        sink.emit(summary)
        return
    head = {k: v for k, v in summary.items() if k not in ("columns", "samples_preview")}
    sink.emit(head)
    sink.out.print()
    sink.emit(summary["columns"], columns=["name", "encoding", "size"], title="columns")
    for i, sample in enumerate(summary["samples_preview"]):
        sink.out.print(f"sample {i}: " + json.dumps(sample, ensure_ascii=False, default=str), markup=False)


def verify_cmd(
    url: str = typer.Argument(..., help="The dataset's folder or URL (where index.json is)."),
    workers: int = typer.Option(4, "--workers", "-w", help="Shards checked in parallel."),
    secret: str = typer.Option(None, "--secret", help=_SECRET_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check every shard: present, right size, every hash, every header. Exits 1 on a bad shard."""
    _json(json_out)
    with _progress("verifying", "shards") as progress:
        report = _plane().verify_dataset(url, workers=workers, progress=progress, secret=secret)
    data = report.as_dict()
    if sink.json_mode:
        sink.emit(data)
    else:
        sink.emit({k: v for k, v in data.items() if k != "bad_shards"})
    for bad in report.bad:
        for problem in bad.problems:
            sink.info(f"bad shard {bad.shard}: {problem}")
    if not report.ok:
        from foundry.plugins.errors import DataError

        names = ", ".join(b.shard for b in report.bad)
        raise DataError(f"{len(report.bad)} of {len(report.shards)} shards are bad: {names}",
                        hint="re-write or re-upload those shards")


def register(app: typer.Typer) -> None:
    sub = group(app, "dataset")
    sub.command("convert")(convert_cmd)
    sub.command("inspect")(inspect_cmd)
    sub.command("verify")(verify_cmd)
