"""`foundry dataset convert --tokenizer PATH --concat-tokens N`: text -> fixed-length token samples.

The replacement for LLM Foundry's `convert_dataset_hf.py --concat_tokens N`, with the same output
(one column, `tokens: ndarray:int32`) and the same concatenation: every document is tokenized (with
the tokenizer's own special tokens), framed as `bos_text tokens eos_text`, appended to a buffer, and
each full run of N tokens becomes a sample. With wrapping (the default) the rest of a document
carries over into the next sample; with `no_wrap` it is dropped. The tokens left at the end (fewer
than N) are dropped, as LLM Foundry does, unless `keep_remainder` writes them as one shorter
last sample.

Sources, read in order: a JSON-lines file (the `text_field` of each object), a `.txt` file (one
document), a folder of such files (sorted by name), or a Hugging Face dataset saved to disk with
`save_to_disk` (needs `datasets`; a DatasetDict needs `split`). The tokenizer is a `tokenizer.json`
file (or a folder holding one), loaded with the `tokenizers` package: nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from foundry.plugins.errors import ConfigError, DataError

from ..writer import MDSWriter
from .convert import ConvertResult

COLUMNS = {"tokens": "ndarray:int32"}
TEXT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".txt")
_BATCH = 256  # documents tokenized together (the tokenizer spreads a batch over its threads)


@dataclass
class TokenizeOptions:
    tokenizer: str
    concat_tokens: int
    eos_text: str = ""
    bos_text: str = ""
    no_wrap: bool = False
    keep_remainder: bool = False
    text_field: str = "text"
    split: str | None = None


@dataclass
class TokenizeResult(ConvertResult):
    """A conversion's result, with what was tokenized."""

    documents: int
    tokens: int


def load_tokenizer(path: str):
    """A `tokenizers.Tokenizer` from a tokenizer.json file or a folder that holds one."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigError("tokenizing needs the `tokenizers` package",
                          hint="pip install 'foundry-anywhere[text]'") from None
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / "tokenizer.json"
    if not file.is_file():
        raise ConfigError(f"no tokenizer file at {path}", hint="give a tokenizer.json (or the folder holding it)")
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # noqa: BLE001 - the Rust error says what is wrong with the file
        raise ConfigError(f"{file} is not a tokenizer file: {str(exc).splitlines()[0]}",
                          hint="save one with tokenizers' Tokenizer.save or a model's tokenizer.json") from None


def is_hf_dataset_dir(path: Path) -> bool:
    return path.is_dir() and any((path / n).is_file() for n in ("dataset_dict.json", "state.json"))


def documents(src: str, text_field: str = "text", split: str | None = None) -> tuple[str, Iterator[str]]:
    """(kind, the source's documents in order)."""
    path = Path(src).expanduser()
    if is_hf_dataset_dir(path):
        return "hf", _hf_documents(path, text_field, split)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
        if not files:
            raise ConfigError(f"{src} holds no text files", hint=f"expected {', '.join(TEXT_SUFFIXES)} files")
        return "text", (doc for f in files for doc in _file_documents(f, text_field))
    if path.is_file():
        if path.suffix.lower() not in TEXT_SUFFIXES:
            raise ConfigError(f"cannot tokenize {src}", hint=f"use {', '.join(TEXT_SUFFIXES)}, a folder of them, "
                                                             "or a Hugging Face dataset saved with save_to_disk")
        return "text", _file_documents(path, text_field)
    raise ConfigError(f"source {src} does not exist")


def _file_documents(path: Path, text_field: str) -> Iterator[str]:
    if path.suffix.lower() == ".txt":
        yield path.read_text(encoding="utf-8")
        return
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise DataError(f"{path}:{n} is not JSON") from None
            text = row.get(text_field) if isinstance(row, dict) else None
            if not isinstance(text, str):
                raise ConfigError(f"{path}:{n} has no string field {text_field!r}", hint="choose it with --text-field")
            yield text


def _hf_documents(path: Path, text_field: str, split: str | None) -> Iterator[str]:
    """Opens the dataset now (so a wrong split or column fails before anything is written)."""
    data = _open_hf(path, text_field, split)

    def texts() -> Iterator[str]:
        for batch in data.iter(batch_size=_BATCH):
            yield from batch[text_field]

    return texts()


def _open_hf(path: Path, text_field: str, split: str | None):
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"{path} is a Hugging Face dataset: reading it needs the `datasets` package",
                          hint="pip install datasets") from None
    data = datasets.load_from_disk(str(path))
    if isinstance(data, datasets.DatasetDict):
        if split not in data:
            raise ConfigError(f"{path} holds the splits {sorted(data)}", hint="choose one with --split")
        data = data[split]
    if text_field not in data.column_names:
        raise ConfigError(f"{path} has no column {text_field!r} (columns: {', '.join(data.column_names)})",
                          hint="choose it with --text-field")
    return data


def token_samples(docs: Iterator[str], tokenizer, opts: TokenizeOptions,
                  counts: dict[str, int] | None = None) -> Iterator[np.ndarray]:
    """Fixed-length int32 token arrays, concatenated across documents (see the module docstring)."""
    if opts.concat_tokens < 1:
        raise ConfigError("--concat-tokens must be at least 1")
    bos = tokenizer.encode(opts.bos_text, add_special_tokens=False).ids if opts.bos_text else []
    eos = tokenizer.encode(opts.eos_text, add_special_tokens=False).ids if opts.eos_text else []
    n, buffer = opts.concat_tokens, np.empty(0, np.int32)
    counts = counts if counts is not None else {}
    counts.setdefault("documents", 0)
    counts.setdefault("tokens", 0)
    for batch in _batches(docs):
        for encoding in tokenizer.encode_batch(batch):  # special tokens added, as LLM Foundry's call does
            doc = np.asarray(bos + encoding.ids + eos, np.int32)
            counts["documents"] += 1
            counts["tokens"] += len(doc)
            buffer = np.concatenate([buffer, doc]) if len(buffer) else doc
            while len(buffer) >= n:
                yield buffer[:n]
                buffer = buffer[n:] if not opts.no_wrap else np.empty(0, np.int32)
    if opts.keep_remainder and len(buffer):
        yield buffer


def _batches(docs: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def tokenize_to_mds(
    src: str,
    dst: str,
    opts: TokenizeOptions,
    *,
    compression: str | None = None,
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    exist_ok: bool = False,
    progress: Callable[[int, "int | None"], None] | None = None,
) -> TokenizeResult:
    """Tokenize `src` into an MDS dataset of `tokens` samples at `dst` (a path or storage URL)."""
    tokenizer = load_tokenizer(opts.tokenizer)
    kind, docs = documents(src, opts.text_field, opts.split)
    counts: dict[str, int] = {}
    written = 0
    # A failure part-way (a bad line 10,000 documents in) leaves no index.json; a folder this call
    # created is removed too, so nothing half-written stays behind.
    created = "://" not in dst and not Path(dst).expanduser().exists()
    try:
        chosen = {} if hashes is None else {"hashes": hashes}  # None: the writer's default, not "none"
        with MDSWriter(out=dst, columns=COLUMNS, compression=compression, size_limit=size_limit,
                       exist_ok=exist_ok, **chosen) as writer:
            for sample in token_samples(docs, tokenizer, opts, counts):
                writer.write({"tokens": sample})
                written += 1
                if progress and written % 1024 == 0:
                    progress(written, None)
    except BaseException:
        if created:
            shutil.rmtree(Path(dst).expanduser(), ignore_errors=True)
        raise
    if progress:
        progress(written, written)
    return TokenizeResult(kind, dst, written, len(writer.shards), dict(COLUMNS), 1,
                          counts.get("documents", 0), counts.get("tokens", 0))


__all__ = ["TokenizeOptions", "TokenizeResult", "documents", "load_tokenizer", "token_samples", "tokenize_to_mds"]
