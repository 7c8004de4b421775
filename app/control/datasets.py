"""Registered datasets (FOUNDRY_HOME/datasets.yaml) and what the CLI and the TUI show about one.

    datasets:
      - {url: s3://bucket/mds/train, name: train, secret: r2}    # secret: optional, read with it

`DatasetRegistry` keeps the list (atomic rewrite under a file lock). The rest are thin adapters over
foundry.streaming's inspect / verify / convert (what `foundry dataset inspect|verify|convert` run), so
the TUI shows the CLI's numbers: `inspect_dataset(url)` (index.json only), `read_samples` (pages of
decoded samples, downloading only the shards needed), `verify_dataset`, `convert_to_mds`. Long work
takes a `progress(done, total)` callback.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from filelock import FileLock

from foundry.app.names import check_name, to_name
from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.errors import ConfigError

Progress = Callable[[int, int], None]


@dataclass
class DatasetEntry:
    url: str
    name: str
    secret: str | None = None       # a stored secret the TUI reads it with (`dataset add --secret`)


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
        return [DatasetEntry(str(i["url"]), str(i.get("name") or _default_name(i["url"])),
                             str(i["secret"]) if i.get("secret") else None)
                for i in items if isinstance(i, dict) and i.get("url")]

    def add(self, url: str, name: str | None = None, secret: str | None = None) -> DatasetEntry:
        url = url.strip()
        if not url:
            raise ConfigError("a dataset URL is empty", hint="e.g. s3://bucket/path or /local/folder")
        if "://" not in url:
            url = Path(url).expanduser().absolute().as_uri()
        entry = DatasetEntry(url, check_name("dataset", name) if name is not None else _default_name(url),
                             secret or None)
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
        rows = [{"url": e.url, "name": e.name} | ({"secret": e.secret} if e.secret else {}) for e in items]
        atomic_write(self.path, yaml.safe_dump({"datasets": rows}, sort_keys=False))


def _default_name(url: str) -> str:
    parts = [p for p in str(url).rstrip("/").split("/") if p]
    return to_name("-".join(parts[-2:]) if len(parts) >= 2 else (parts[-1] if parts else "dataset"))


def _file_url(path_or_url: str | os.PathLike) -> str:
    text = str(path_or_url)
    return text if "://" in text else Path(text).expanduser().absolute().as_uri()


def inspect_dataset(url: str) -> DatasetSummary:
    """Shards, samples, bytes, columns, compression (index.json only) — `foundry dataset inspect`'s numbers."""
    from foundry.streaming.tools.inspect import inspect_dataset as _inspect

    info = _inspect(url, samples=0)
    compression = [c for c in info["compression"] if c != "none"]
    return DatasetSummary(
        url=url, format=",".join(info["formats"]) or "mds", shards=info["shards"], samples=info["samples"],
        bytes=info["stored_bytes"], raw_bytes=info["raw_bytes"],
        columns={c["name"]: c["encoding"] for c in info["columns"]},
        compression=",".join(compression) or None, hashes=list(info["hashes"]))


def read_samples(url: str, start: int = 0, count: int = 10) -> list[dict[str, Any]]:
    """Decoded samples [start, start+count) of the dataset (downloads only the shards needed).

    Columns with an unsafe encoding (pkl) are refused with a DataError, as the dataset refuses them."""
    from foundry.streaming.format import open_shard
    from foundry.streaming.tools.inspect import fetch_shard, open_dataset_store, read_index

    store = open_dataset_store(url)
    out: list[dict[str, Any]] = []
    offset = 0
    with tempfile.TemporaryDirectory(prefix="foundry-samples-") as tmp:
        for shard in read_index(store):
            lo, hi = offset, offset + shard.samples
            offset = hi
            if hi <= start or len(out) >= count:
                continue
            paths = fetch_shard(store, shard, tmp)
            with open_shard(shard, paths[0], meta_path=paths[1] if len(paths) > 1 else None) as reader:
                for i in range(max(start - lo, 0), shard.samples):
                    if len(out) >= count:
                        break
                    out.append(reader.get_sample(i))
    return out


def verify_dataset(url: str, progress: Progress | None = None) -> list[str]:
    """Check every shard (hashes, sizes, headers), as `foundry dataset verify`; returns the problems."""
    from foundry.streaming.tools.verify import verify_dataset as _verify

    report = _verify(url, progress=progress)
    return [f"{bad.shard}: {problem}" for bad in report.bad for problem in bad.problems]


def convert_to_mds(src: str | Path, dst: str, compression: str | None = None,
                   hashes: tuple[str, ...] | None = None, size_limit: int | str = "64mb",
                   progress: Callable[[int, int | None], None] | None = None) -> DatasetSummary:
    """Convert a JSONL/CSV file or an image folder into MDS at `dst` (`foundry dataset convert`)."""
    from foundry.streaming.tools.convert import convert

    if not Path(src).expanduser().exists():
        raise ConfigError(f"{str(src)!r} does not exist")
    dst = str(dst) if "://" in str(dst) else str(Path(dst).expanduser().absolute())
    convert(str(Path(src).expanduser()), dst, compression=compression, hashes=None if hashes is None else list(hashes),
            size_limit=size_limit, progress=progress)
    return inspect_dataset(_file_url(dst))
