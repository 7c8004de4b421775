"""index.json (version 2): parse into ShardInfo records, and build it back byte-for-byte.

Every shard entry repeats the writer's configuration; `raw_data` / `zip_data` (and, for the split
formats csv/tsv/xsv/json, `raw_meta` / `zip_meta`) describe the files. When a shard is compressed
only the `zip_*` file is stored remotely.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from foundry.plugins.errors import DataError, DataJSONDecodeError, DataValueError

from .block_digests import INDEX_KEY, record_location

INDEX_BASENAME = "index.json"
FORMATS = ("mds", "json", "csv", "tsv", "xsv")
SPLIT_FORMATS = ("json", "csv", "tsv", "xsv")


@dataclass
class ShardFile:
    """One stored file of a shard: what is fetched (`remote_basename`) and what is read (`raw_basename`)."""

    raw_basename: str
    raw_bytes: int
    raw_hashes: dict[str, str]
    zip_basename: str | None = None
    zip_bytes: int | None = None
    zip_hashes: dict[str, str] | None = None

    @property
    def remote_basename(self) -> str:
        return self.zip_basename or self.raw_basename

    @property
    def remote_bytes(self) -> int:
        return self.zip_bytes if self.zip_bytes is not None else self.raw_bytes

    @property
    def remote_hashes(self) -> dict[str, str]:
        return self.zip_hashes if self.zip_basename else self.raw_hashes


class FileInfo(NamedTuple):
    """One file of a shard as mosaic's readers describe it."""

    basename: str
    bytes: int | None
    hashes: dict[str, str]


@dataclass
class ShardInfo:
    """One shard of an index.json, flattened. `entry` is the original dict, untouched."""

    format: str
    samples: int
    compression: str | None
    remote_basename: str
    raw_basename: str
    raw_bytes: int
    zip_bytes: int | None
    raw_hashes: dict[str, str]
    zip_hashes: dict[str, str] | None
    column_names: list[str]
    column_encodings: list[str]
    column_sizes: list[int | None]
    entry: dict[str, Any]
    size_limit: int | None
    hashes: list[str] = field(default_factory=list)
    data: ShardFile | None = None
    meta: ShardFile | None = None  # split formats only
    # where this shard's block digests are (file, offset, bytes: format.block_digests), from
    # index.json's top level; None: look for an older writer's `<shard>.blocks.json`
    digests: tuple[str, int, int] | None = None

    def __len__(self) -> int:  # as mosaic's shard readers: its samples
        return self.samples

    @property
    def raw_data(self) -> FileInfo:
        """mosaic's `shard.raw_data` (basename, bytes, hashes) of the data file."""
        return FileInfo(self.data.raw_basename, self.data.raw_bytes, dict(self.data.raw_hashes))

    @property
    def zip_data(self) -> FileInfo | None:
        """mosaic's `shard.zip_data`: the compressed data file, or None."""
        d = self.data
        return FileInfo(d.zip_basename, d.zip_bytes, dict(d.zip_hashes or {})) if d.zip_basename else None

    @property
    def files(self) -> list[ShardFile]:
        """Every file the shard needs locally: the data file, then the meta file if any."""
        return [f for f in (self.data, self.meta) if f is not None]

    @property
    def remote_bytes(self) -> int:
        return sum(f.remote_bytes for f in self.files)


class UnsafeShardName(DataError):
    """A file name in index.json that could reach outside the dataset folder."""

    exit_code = 2


def check_basename(name: Any, where: str) -> str:
    """A shard file name from data, refused unless it stays inside the dataset folder.

    mosaicml-streaming writes `shard.00000.mds[.zstd]`, or `sub/dir/shard...` for merged
    indexes: a relative "/"-separated path. Refused: absolute paths, "..", "." and empty parts,
    backslashes, control characters, parts starting with "." (the cache's own files and
    temporaries are dot-names), and index.json itself.
    """
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or name.startswith("/") or "\\" in name or any(ord(c) < 32 for c in name)
            or any(not p or p.startswith(".") for p in parts) or name == INDEX_BASENAME):
        raise UnsafeShardName(f"{where} names the file {name!r}, which is not a plain relative path",
                              hint="refusing to touch it; regenerate index.json with a Foundry or mosaic writer")
    return name


def _file(entry: dict, raw_key: str, zip_key: str, where: str) -> ShardFile:
    raw = entry.get(raw_key)
    if not isinstance(raw, dict) or "basename" not in raw or "bytes" not in raw:
        raise DataError(f"{where}: missing or malformed {raw_key!r}")
    zipped = entry.get(zip_key)
    if zipped is not None and (not isinstance(zipped, dict) or "basename" not in zipped):
        raise DataError(f"{where}: malformed {zip_key!r}")
    return ShardFile(
        raw_basename=check_basename(raw["basename"], f"{where} {raw_key}"),
        raw_bytes=int(raw["bytes"]),
        raw_hashes=dict(raw.get("hashes") or {}),
        zip_basename=check_basename(zipped["basename"], f"{where} {zip_key}") if zipped else None,
        zip_bytes=int(zipped["bytes"]) if zipped else None,
        zip_hashes=dict(zipped.get("hashes") or {}) if zipped else None,
    )


def shard_info(entry: dict[str, Any], position: int = 0, source: str | None = None) -> ShardInfo:
    """Parse one shard entry of index.json (`source`: the dataset, for messages)."""
    where = f"{_index_name(source)} shard {position}"
    if not isinstance(entry, dict):
        raise DataError(f"{where} is not an object")
    if entry.get("version") != 2:
        raise DataError(f"{where} has version {entry.get('version')!r}", hint="only version 2 is supported")
    fmt = entry.get("format")
    if fmt not in FORMATS:
        raise DataError(f"{where} has unknown format {fmt!r}", hint=f"supported: {', '.join(FORMATS)}")
    if not isinstance(entry.get("samples"), int) or entry["samples"] < 0:
        raise DataError(f"{where} has no valid sample count")
    data = _file(entry, "raw_data", "zip_data", where)
    meta = _file(entry, "raw_meta", "zip_meta", where) if fmt in SPLIT_FORMATS else None
    if fmt == "json":
        columns = entry.get("columns")
        if not isinstance(columns, dict):
            raise DataError(f"{where} (json) has no 'columns'")
        names = sorted(columns)
        encodings = [columns[n] for n in names]
        sizes: list[int | None] = [None] * len(names)
    else:
        names, encodings = entry.get("column_names"), entry.get("column_encodings")
        if not isinstance(names, list) or not isinstance(encodings, list) or len(names) != len(encodings):
            raise DataError(f"{where} has malformed column_names / column_encodings")
        sizes = list(entry.get("column_sizes") or [None] * len(names))
        if len(sizes) != len(names):
            raise DataError(f"{where} has malformed column_sizes")
    compression = entry.get("compression") or None
    if compression and data.zip_basename is None:
        raise DataError(f"{where} is compressed ({compression}) but has no zip_data")
    return ShardInfo(
        format=fmt,
        samples=entry["samples"],
        compression=compression,
        remote_basename=data.remote_basename,
        raw_basename=data.raw_basename,
        raw_bytes=data.raw_bytes,
        zip_bytes=data.zip_bytes,
        raw_hashes=data.raw_hashes,
        zip_hashes=data.zip_hashes,
        column_names=list(names),
        column_encodings=list(encodings),
        column_sizes=sizes,
        entry=entry,
        size_limit=entry.get("size_limit"),
        hashes=list(entry.get("hashes") or []),
        data=data,
        meta=meta,
    )


def _index_name(source: str | None) -> str:
    return f"{source.rstrip('/')}/{INDEX_BASENAME}" if source else INDEX_BASENAME


def load_index(data: bytes | str | dict, source: str | None = None) -> list[ShardInfo]:
    """Parse index.json (bytes, text or an already-parsed dict); DataError unless version 2.

    Every file name in it is checked here (`check_basename`), before anything touches the file
    system; `source` (the dataset's URL or folder) names it in errors.
    """
    if isinstance(data, (bytes, bytearray, str)):
        try:
            obj = json.loads(data)
        except json.JSONDecodeError as exc:  # mosaic lets it through: also a json.JSONDecodeError here
            raise DataJSONDecodeError(f"index.json is not valid JSON: {exc}", doc=exc.doc, pos=exc.pos) from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataValueError(f"index.json is not valid JSON: {exc}") from None
    else:
        obj = data
    if not isinstance(obj, dict) or not isinstance(obj.get("shards"), list):
        raise DataError("index.json has no 'shards' list", hint="is this a streaming dataset directory?")
    if obj.get("version") != 2:
        raise DataValueError(
            f"unsupported index.json version {obj.get('version')!r}",
            hint="Foundry reads version 2 (mosaicml-streaming >= 0.5); rewrite older datasets",
        )
    infos = [shard_info(entry, i, source) for i, entry in enumerate(obj["shards"])]
    found = obj.get(INDEX_KEY)
    if found is not None:
        for info in infos:
            where = record_location(found, info.raw_basename)
            if where is not None:
                info.digests = (check_basename(where[0], f"{_index_name(source)} {INDEX_KEY}"), where[1], where[2])
    return infos


def dump_index(entries: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> bytes:
    """index.json bytes exactly as mosaicml-streaming writes them (sorted keys, default separators);
    `extra`: more top-level keys (mosaic reads only version and shards)."""
    return json.dumps({"version": 2, "shards": entries, **(extra or {})}, sort_keys=True).encode("utf-8")


def shard_basename(position: int, fmt: str, extension: str | None = None) -> str:
    """`shard.00003.mds`, `shard.00003.json.meta` (5 digits zero-padded, more when needed)."""
    parts = ["shard", f"{position:05}", fmt]
    if extension:
        parts.append(extension)
    return ".".join(parts)
