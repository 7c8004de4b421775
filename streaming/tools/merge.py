"""mosaicml-streaming's `merge_index`: the parallel-writer pattern (each worker writes a complete
sub-dataset into a folder of `out`, then one index.json at `out` names every shard as
`folder/shard...`). `foundry dataset convert --workers N` merges its parts the same way.

    merge_index(out)                          # every <folder>/index.json below out (local or URL)
    merge_index([index_url, ...], out)        # these index.json files; each may be (local, remote)

`out` is a folder, a URL of any registered scheme or a `(local, remote)` pair. `keep_local=False`
leaves no local copy of the merged index when `out` has a remote (mosaic deletes its whole local
folder then; Foundry never deletes data). `download_timeout` is accepted: the stores time out
themselves.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath
from typing import Any, Sequence

from foundry.plugins.errors import ConfigValueError, DataFileNotFoundError, ObjectNotFoundError

from ..format.block_digests import INDEX_KEY
from ..format.index import INDEX_BASENAME, dump_index, load_index

Out = str | tuple[str, str]


def merge_index(*args: Any, **kwargs: Any) -> None:
    """`merge_index(index_file_urls, out, keep_local=True, download_timeout=60)` or
    `merge_index(out, keep_local=True, download_timeout=60)`, dispatched as mosaic does."""
    first = args[0] if args else kwargs.get("index_file_urls", kwargs.get("out"))
    if isinstance(first, list) and 2 <= len(args) + len(kwargs) <= 4:
        return merge_index_files(*args, **kwargs)
    if isinstance(first, (str, tuple)) and 1 <= len(args) + len(kwargs) <= 3:
        return merge_index_from_root(*args, **kwargs)
    raise ConfigValueError("merge_index takes (index_file_urls, out, ...) or (out, ...)",
                           hint="e.g. merge_index('s3://bucket/dataset') after each worker wrote a sub-folder")


def merge_index_files(index_file_urls: Sequence[str | tuple[str, str]], out: Out, keep_local: bool = True,
                      download_timeout: float = 60) -> None:
    """One index.json at `out` naming every shard of these index files, in their order; each
    shard's files are prefixed with the name of its index's folder (mosaic's rule)."""
    if not index_file_urls or not out:
        return
    seen: list[Any] = []
    for url in index_file_urls:  # duplicates once, as mosaic's OrderedDict does
        url = url.rstrip("/").strip() if isinstance(url, str) else (url[0].rstrip("/").strip(), url[1].rstrip("/").strip())
        if url not in seen:
            seen.append(url)
    parts = []
    for url in seen:
        source = url[0] if isinstance(url, tuple) and os.path.exists(url[0]) else url[1] if isinstance(url, tuple) else url
        parts.append((PurePosixPath(_path_of(source)).parent.name, _read(source)))
    _publish(out, merged_index(parts), keep_local)


def merge_index_from_root(out: Out, keep_local: bool = True, download_timeout: float = 60) -> None:
    """Merge every `<folder>/index.json` below `out` (not `out/index.json` itself), sorted by path."""
    if not out:
        return
    local, remote = _split_out(out)
    if remote is not None:
        from foundry.plugins.manager import open_store

        keys = sorted(o.key for o in open_store(remote).list() if _is_part_index(o.key))
        parts = [(str(PurePosixPath(k).parent), _local_or_remote(local, remote, k)) for k in keys]
    else:
        keys = sorted(str(p.relative_to(local)).replace(os.sep, "/")
                      for p in _walk_indexes(local))
        parts = [(str(PurePosixPath(k).parent), _read(os.path.join(local, k))) for k in keys]
    _publish(out, merged_index(parts), keep_local)


def merged_index(parts: Sequence[tuple[str, bytes]]) -> bytes:
    """One index.json from each `(folder, its index.json)`: the shards in order, every file name
    prefixed with `folder/`, the block digests' locations too (format.block_digests)."""
    merged: list[dict[str, Any]] = []
    digests: dict[str, list] = {}
    for folder, index in parts:
        for info in load_index(index, folder):
            entry = dict(info.entry)
            for key in ("raw_data", "zip_data", "raw_meta", "zip_meta"):
                if entry.get(key):
                    entry[key] = dict(entry[key], basename=f"{folder}/{entry[key]['basename']}")
            merged.append(entry)
            if info.digests is not None:
                name, offset, size = info.digests
                digests[f"{folder}/{info.raw_basename}"] = [f"{folder}/{name}", offset, size]
    return dump_index(merged, {INDEX_KEY: digests} if digests else None)


def _is_part_index(key: str) -> bool:
    return key.endswith("/" + INDEX_BASENAME)


def _walk_indexes(local: str) -> list[Any]:
    from pathlib import Path

    return [p for p in Path(local).rglob(INDEX_BASENAME) if p.parent != Path(local)]


def _split_out(out: Out) -> tuple[str | None, str | None]:
    if isinstance(out, (tuple, list)):
        return os.path.expanduser(out[0]), out[1]
    return (None, out) if "://" in out else (os.path.expanduser(out), None)


def _path_of(source: str) -> str:
    return source.split("://", 1)[1] if "://" in source else source


def _read(source: str) -> bytes:
    """An index.json's bytes from a local path or a URL."""
    if "://" not in source:
        try:
            with open(source, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise DataFileNotFoundError(f"index file {source} does not exist") from None
    from foundry.plugins.manager import open_store

    folder, _, name = source.rstrip("/").rpartition("/")
    try:
        return open_store(folder).get(name)
    except ObjectNotFoundError:
        raise DataFileNotFoundError(f"index file {source} does not exist") from None


def _local_or_remote(local: str | None, remote: str, key: str) -> bytes:
    if local is not None and os.path.exists(os.path.join(local, key)):
        return _read(os.path.join(local, key))
    return _read(f"{remote.rstrip('/')}/{key}")


def _publish(out: Out, index: bytes, keep_local: bool) -> None:
    local, remote = _split_out(out)
    if remote is not None:
        from foundry.plugins.manager import open_store

        open_store(remote).put(INDEX_BASENAME, index)
    if local is not None and (keep_local or remote is None):
        from foundry.plugins.storage import atomic_destination

        os.makedirs(local, exist_ok=True)
        with atomic_destination(os.path.join(local, INDEX_BASENAME)) as tmp, open(tmp, "wb") as f:
            f.write(index)
