"""Registered datasets (FOUNDRY_HOME/datasets.yaml) and what the CLI and the TUI show about one.

    datasets:
      - {url: s3://bucket/mds/train, name: train}

`DatasetRegistry` keeps the list (atomic rewrite under a file lock). `inspect_dataset(url)` reads
index.json only (shards, samples, bytes, columns, compression); `read_samples` downloads the shards
it needs into a temporary folder and decodes samples; `verify_dataset` checks every stored file's
hashes; `convert_to_mds` turns JSONL, CSV/TSV or a folder of images (one sub-folder per class) into
MDS. All of them take a `progress(done, total)` callback where the work is long.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml
from filelock import FileLock

from foundry.plugins.errors import ConfigError, DataError, ObjectNotFoundError

Progress = Callable[[int, int], None]
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")


@dataclass
class DatasetEntry:
    url: str
    name: str


@dataclass
class DatasetSummary:
    url: str
    format: str
    shards: int
    samples: int
    bytes: int                      # stored (compressed where compressed)
    raw_bytes: int
    columns: dict[str, str]         # name -> encoding
    compression: str | None
    hashes: list[str] = field(default_factory=list)


class DatasetRegistry:
    def __init__(self, home: str | os.PathLike):
        self.path = Path(home) / "datasets.yaml"

    def list(self) -> list[DatasetEntry]:
        if not self.path.exists():
            return []
        try:
            data = yaml.safe_load(self.path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{self.path}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
        items = data.get("datasets", []) if isinstance(data, dict) else []
        return [DatasetEntry(str(i["url"]), str(i.get("name") or _default_name(i["url"])))
                for i in items if isinstance(i, dict) and i.get("url")]

    def add(self, url: str, name: str | None = None) -> DatasetEntry:
        url = url.strip()
        if not url:
            raise ConfigError("a dataset URL is empty", hint="e.g. s3://bucket/path or /local/folder")
        if "://" not in url:
            url = Path(url).expanduser().absolute().as_uri()
        entry = DatasetEntry(url, name or _default_name(url))
        with FileLock(str(self.path) + ".lock"):
            items = self.list()
            if any(e.url == url or e.name == entry.name for e in items):
                raise ConfigError(f"dataset {entry.name!r} ({url}) is already registered",
                                  hint="`foundry dataset list` shows the registered datasets")
            self._write(items + [entry])
        return entry

    def remove(self, name_or_url: str) -> None:
        with FileLock(str(self.path) + ".lock"):
            items = self.list()
            kept = [e for e in items if name_or_url not in (e.name, e.url)]
            if len(kept) == len(items):
                raise ConfigError(f"no registered dataset {name_or_url!r}")
            self._write(kept)

    def _write(self, items: list[DatasetEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(yaml.safe_dump({"datasets": [{"url": e.url, "name": e.name} for e in items]},
                                      sort_keys=False))
        os.replace(tmp, self.path)


def _default_name(url: str) -> str:
    parts = [p for p in str(url).rstrip("/").split("/") if p]
    return "-".join(parts[-2:]) if len(parts) >= 2 else (parts[-1] if parts else "dataset")


def _store(url: str):
    from foundry.plugins.manager import open_store

    return open_store(url)


def _shards(url: str):
    from foundry.streaming.format import load_index

    store = _store(url)
    try:
        raw = store.get("index.json")
    except ObjectNotFoundError:
        raise DataError(f"no index.json at {url}", hint="is this an MDS dataset folder?") from None
    return store, load_index(raw)


def inspect_dataset(url: str) -> DatasetSummary:
    _, shards = _shards(url)
    if not shards:
        return DatasetSummary(url, "mds", 0, 0, 0, 0, {}, None)
    first = shards[0]
    return DatasetSummary(
        url=url, format=first.format, shards=len(shards), samples=sum(s.samples for s in shards),
        bytes=sum(s.remote_bytes for s in shards),
        raw_bytes=sum(sum(f.raw_bytes for f in s.files) for s in shards),
        columns=dict(zip(first.column_names, first.column_encodings)), compression=first.compression,
        hashes=list(first.hashes))


def _local_shard(store, shard, folder: Path) -> Path:
    from foundry.streaming.format import decompress_file

    for f in shard.files:
        raw = folder / f.raw_basename
        if raw.exists():
            continue
        remote = folder / f.remote_basename
        store.get_file(f.remote_basename, remote)
        if f.zip_basename:
            decompress_file(shard.compression, remote, raw)
    return folder / shard.raw_basename


def read_samples(url: str, start: int = 0, count: int = 10) -> list[dict[str, Any]]:
    """Decoded samples [start, start+count) of the dataset (downloads only the shards needed)."""
    from foundry.streaming.format import open_shard

    store, shards = _shards(url)
    out: list[dict[str, Any]] = []
    offset = 0
    with tempfile.TemporaryDirectory(prefix="foundry-samples-") as tmp:
        for shard in shards:
            lo, hi = offset, offset + shard.samples
            offset = hi
            if hi <= start or len(out) >= count:
                continue
            reader = open_shard(shard, _local_shard(store, shard, Path(tmp)))
            try:
                for i in range(max(start - lo, 0), shard.samples):
                    if len(out) >= count:
                        break
                    out.append(reader.get_sample(i))
            finally:
                reader.close()
    return out


def verify_dataset(url: str, progress: Progress | None = None) -> list[str]:
    """Check every stored file against the hashes in index.json; returns the problems (empty: ok)."""
    from foundry.streaming.format import verify_file

    store, shards = _shards(url)
    problems: list[str] = []
    files = [f for s in shards for f in s.files]
    with tempfile.TemporaryDirectory(prefix="foundry-verify-") as tmp:
        for i, f in enumerate(files):
            local = Path(tmp) / f.remote_basename
            try:
                store.get_file(f.remote_basename, local)
            except Exception as exc:
                problems.append(f"{f.remote_basename}: cannot read ({getattr(exc, 'message', exc)})")
            else:
                if local.stat().st_size != f.remote_bytes:
                    problems.append(f"{f.remote_basename}: {local.stat().st_size} bytes, expected {f.remote_bytes}")
                elif f.remote_hashes and not verify_file(local, f.remote_hashes):
                    problems.append(f"{f.remote_basename}: hash mismatch ({', '.join(f.remote_hashes)})")
                local.unlink(missing_ok=True)
            if progress:
                progress(i + 1, len(files))
    return problems


# --- conversion -----------------------------------------------------------------------------------
def source_kind(src: str | Path) -> str:
    path = Path(src).expanduser()
    if path.is_dir():
        return "images"
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    raise ConfigError(f"cannot convert {str(src)!r}", hint="give a .jsonl, .csv/.tsv file or a folder of images")


def _records(src: Path, kind: str) -> tuple[list[Any], Callable[[Any], dict[str, Any]]]:
    if kind == "jsonl":
        lines = [ln for ln in src.read_text().splitlines() if ln.strip()]
        return lines, json.loads
    if kind == "csv":
        delim = "\t" if src.suffix.lower() == ".tsv" else ","
        with open(src, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter=delim))
        return rows, dict
    classes = sorted(p.name for p in src.iterdir() if p.is_dir())
    files = sorted(p for c in classes for p in (src / c).rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    return files, lambda p: {"image": p.read_bytes(), "label": classes.index(p.relative_to(src).parts[0])}


def _columns(sample: dict[str, Any], kind: str) -> dict[str, str]:
    if kind == "images":
        return {"image": "bytes", "label": "int"}
    cols = {}
    for key, value in sample.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            cols[key] = "json" if isinstance(value, (dict, list)) else "str"
        else:
            cols[key] = "int" if isinstance(value, int) else "float64"
    return cols


def convert_to_mds(src: str | Path, dst: str, compression: str | None = None,
                   hashes: tuple[str, ...] = ("sha1",), size_limit: int | str = "64mb",
                   progress: Progress | None = None) -> DatasetSummary:
    """Convert a JSONL/CSV file or an image folder into an MDS dataset at `dst` (local or remote)."""
    from foundry.streaming import MDSWriter

    src = Path(src).expanduser()
    if not src.exists():
        raise ConfigError(f"{str(src)!r} does not exist")
    kind = source_kind(src)
    items, parse = _records(src, kind)
    if not items:
        raise DataError(f"{src} holds no samples")
    columns = _columns(parse(items[0]), kind)
    if "://" not in dst:
        dst = str(Path(dst).expanduser().absolute())
    with MDSWriter(columns=columns, out=dst, compression=compression, hashes=list(hashes),
                   size_limit=size_limit) as writer:
        for i, item in enumerate(_iter(items, parse, columns)):
            writer.write(item)
            if progress and (i % 64 == 0 or i + 1 == len(items)):
                progress(i + 1, len(items))
    return inspect_dataset(dst if "://" in dst else Path(dst).as_uri())


def _iter(items: list[Any], parse, columns: dict[str, str]) -> Iterator[dict[str, Any]]:
    for item in items:
        sample = parse(item)
        out = {}
        for key, enc in columns.items():
            value = sample.get(key)
            if enc == "int":
                value = int(value)
            elif enc == "float64":
                value = float(value)
            elif enc == "str":
                value = "" if value is None else str(value)
            out[key] = value
        yield out
