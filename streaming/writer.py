"""Dataset writers: MDSWriter, JSONWriter, CSVWriter, TSVWriter, XSVWriter (mosaicml-streaming's API).

`out` is a local directory, a remote URL of any registered storage scheme (shards are staged in a
temporary local directory), or a `(local, remote)` pair. Samples stream to a body file on disk;
when a shard is full a background thread writes its final file (header, hashes, compression) and
queues the upload. `finish()` (or leaving the `with` block) writes index.json LAST: only after
every shard file is written and, for a remote, confirmed in the store. An exception inside the
`with` block aborts: no index.json is written, so a half-written dataset is never mistaken for one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from foundry.plugins.errors import (ConfigError, DataError, DataFileExistsError, DataValueError,
                                    config_errors_as_value_errors)
from foundry.plugins.storage import ProgressCallback, atomic_destination

from .format.compression import parse_compression
from .format.block_digests import DATASET_BASENAME, INDEX_KEY, pack_records
from .format.hashing import is_hash
from .format.index import INDEX_BASENAME, dump_index, shard_basename
from .format import shard_files
from .format.sample_encoders import json_sample_encoder, mds_columns, mds_sample_encoder, xsv_sample_encoder
from .upload import ShardUploader

_UNITS = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}
_PENDING_SHARDS = 3  # shards finishing in the background before write() waits
# Integrity by default: readers verify every download against it, `dataset verify` reports a
# mismatch. xxh3_64 hashes at memory speed, and mosaicml-streaming 0.13 reads and validates it.
# hashes=None or [] passed explicitly writes none, as mosaic does by default.
DEFAULT_HASHES = ("xxh3_64",)
_DEFAULT: Any = object()  # `hashes` not passed: the default above


def parse_size(value: int | str | None) -> int | None:
    """Bytes from an int or a human string ("64mb", "100kb", "1024b"); 0/None mean no limit."""
    if not value:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = value.strip().lower()
    for suffix, unit in _UNITS.items():
        if text.endswith(suffix):
            try:
                return int(float(text[: -len(suffix)]) * unit)
            except ValueError:
                break
    try:
        return int(text[:-1] if text.endswith("b") else text)
    except ValueError:
        raise ConfigError(f"invalid size {value!r}", hint="use bytes or a size like 64mb") from None


class Writer:
    """Shared machinery: output resolution, the size rule, background finishing and uploads."""

    format = ""
    extra_bytes_per_sample = 0

    @config_errors_as_value_errors  # mosaic refuses a bad argument with ValueError
    def __init__(
        self,
        *,
        out: str | tuple[str, str],
        keep_local: bool | None = None,
        compression: str | None = None,
        hashes: list[str] | None = _DEFAULT,
        size_limit: int | str | None = 1 << 26,
        progress: ProgressCallback | None = None,
        exist_ok: bool = False,
        max_workers: int | None = None,
        **kwargs: Any,
    ):
        unknown = set(kwargs) - {"progress_bar", "retry"}
        if unknown:
            raise ConfigError(f"unknown writer argument(s): {', '.join(sorted(unknown))}")
        self.compression = compression or None
        if self.compression:
            parse_compression(self.compression)
        self.hashes = sorted(set(DEFAULT_HASHES if hashes is _DEFAULT else hashes or ()))
        for algo in self.hashes:
            if not is_hash(algo):
                raise ConfigError(f"unknown hash algorithm {algo!r}", hint="e.g. sha1, md5, xxh64, xxh3_64")
        self.size_limit = parse_size(size_limit)
        if self.size_limit is not None and (self.size_limit < 0 or self.size_limit >= shard_files.MAX_SHARD_BYTES):
            raise DataValueError(
                f"size_limit {self.size_limit} is out of range: shards must stay below 4 GiB (uint32 offsets)",
                hint="use a size_limit below 4gb; the default is 64mb",
            )
        self.shards: list[dict[str, Any]] = []
        self.index: bytes | None = None  # index.json as published, once finished
        self._digest_records: dict[int, tuple[str, bytes]] = {}  # shard position -> its block digests
        self._resolve_out(out, keep_local, exist_ok)
        self._failure: BaseException | None = None  # first failure of a background job
        self._uploader = (ShardUploader(self.store, self.local, max_workers or 4, progress, self._set_failure)
                          if self.store else None)
        self._finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="foundry-shard")
        self._pending = threading.Semaphore(_PENDING_SHARDS)
        self._jobs: list[Future] = []
        self._body = None
        self._body_path: str | None = None
        self._body_paths: list[str] = []
        self._sizes: list[int] = []
        self._shard_size = 0
        self._closed = False
        self._stop = False  # closed, or a background job failed: write() must not go on
        self.extra_bytes_per_shard = 0

    # ---- output ------------------------------------------------------------------------------
    def _resolve_out(self, out, keep_local: bool | None, exist_ok: bool) -> None:
        if isinstance(out, (tuple, list)):
            local, remote = out
        elif "://" in str(out):
            local, remote = None, str(out)
        else:
            local, remote = str(out), None
        self.remote = remote
        self.store = None
        if remote is not None:
            from foundry.plugins.manager import open_store

            self.store = open_store(remote)
            if self.store.exists(INDEX_BASENAME) and not exist_ok:
                raise DataFileExistsError(f"{remote} already holds a dataset (index.json)",
                                          hint="pass exist_ok=True to overwrite")
        self._temp_local = local is None
        self.local = tempfile.mkdtemp(prefix="foundry-write-") if local is None else os.path.expanduser(local)
        # A local-only dataset keeps everything; a staged (temporary) one keeps nothing.
        self.keep_local = (not self._temp_local) if keep_local is None or remote is None else keep_local
        if not self._temp_local:
            if os.path.isdir(self.local) and os.listdir(self.local):
                if not exist_ok:
                    raise DataFileExistsError(f"output directory {self.local} is not empty",
                                              hint="pass exist_ok=True to replace it")
                shutil.rmtree(self.local)
            os.makedirs(self.local, exist_ok=True)

    # ---- per-format hooks -------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        return {"version": 2, "format": self.format, "compression": self.compression,
                "hashes": self.hashes, "size_limit": self.size_limit}

    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def _write_files(self, position: int, body_path: str, sizes: list[int]) -> dict[str, Any]:
        raise NotImplementedError

    # ---- writing -----------------------------------------------------------------------------
    def write(self, sample: dict[str, Any]) -> None:
        """Append one sample; may hand the current shard to the background finisher first."""
        if self._stop:
            self._raise_background_failure()
            raise DataError("this writer is finished")
        data = self.encode_sample(sample)
        size = len(data) + self.extra_bytes_per_sample
        if self._sizes and self.size_limit and self.size_limit < self._shard_size + size:
            self.flush_shard()
        if self._shard_size + size >= shard_files.MAX_SHARD_BYTES:
            raise DataError(
                f"shard {len(self._jobs)} would reach 4 GiB; MDS offsets are uint32",
                hint="set a size_limit (default 64mb) so shards stay small",
            )
        if self._body is None:
            name = shard_basename(len(self._jobs), self.format)
            self._body_path = os.path.join(self.local, f".{name}.body.part")
            self._body = open(self._body_path, "wb", buffering=1 << 20)
            self._body_paths.append(self._body_path)
        self._body.write(data)
        self._sizes.append(len(data))
        self._shard_size += size

    def flush_shard(self) -> None:
        if not self._sizes:
            return
        self._body.close()
        body_path, sizes, position = self._body_path, self._sizes, len(self._jobs)
        self._body, self._body_path, self._sizes = None, None, []
        self._shard_size = self.extra_bytes_per_shard
        self._pending.acquire()
        job = self._finisher.submit(self._finish_shard, position, body_path, sizes)
        job.add_done_callback(self._note_failure)
        self._jobs.append(job)

    def _finish_shard(self, position: int, body_path: str, sizes: list[int]) -> dict[str, Any]:
        try:
            entry = self._write_files(position, body_path, sizes)
            entry.update(self.get_config())
            return entry
        finally:
            try:
                os.unlink(body_path)
            except FileNotFoundError:
                pass
            self._pending.release()

    def _finish_file(self, raw_basename: str, raw_info: dict) -> tuple[dict, dict | None]:
        raw, zipped, upload = shard_files.finish_file(
            self.local, raw_basename, raw_info, self.compression, self.hashes
        )
        if self._uploader is not None:
            self._uploader.submit(upload, delete_after=not self.keep_local)
        return raw, zipped

    def _note_failure(self, job: Future) -> None:
        if not job.cancelled() and job.exception() is not None:
            self._set_failure(job.exception())

    def _set_failure(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        self._stop = True

    def _raise_background_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def finish(self) -> None:
        """Write the last shard, wait for every shard (and upload), then write index.json."""
        if self._closed:
            return
        try:
            self.flush_shard()
            self.shards = [job.result() for job in self._jobs]
            if self._uploader is not None:
                self._uploader.wait()
            index = self.index = dump_index(self.shards, self._publish_digests())
            if self.keep_local or self._uploader is None:
                with atomic_destination(os.path.join(self.local, INDEX_BASENAME)) as tmp:
                    with open(tmp, "wb") as f:
                        f.write(index)
            if self._uploader is not None:
                self.store.put(INDEX_BASENAME, index)
        except BaseException:
            self.abort()
            raise
        self._close()

    def _publish_digests(self) -> dict[str, Any]:
        """Write the shards' block digests into the dataset's one digest file (beside index.json,
        stored before it); index.json's top-level entry that locates them, or nothing."""
        if not self._digest_records:
            return {}
        data, where = pack_records([self._digest_records[k] for k in sorted(self._digest_records)])
        if self.keep_local or self._uploader is None:
            with atomic_destination(os.path.join(self.local, DATASET_BASENAME)) as tmp:
                with open(tmp, "wb") as f:
                    f.write(data)
        if self._uploader is not None:
            self.store.put(DATASET_BASENAME, data)
        return {INDEX_KEY: where}

    def abort(self) -> None:
        """Stop without writing index.json; pending work is cancelled, temporary files removed."""
        if self._body is not None:
            self._body.close()
            self._body = None
        if self._body_path:
            try:
                os.unlink(self._body_path)
            except FileNotFoundError:
                pass
        self._finisher.shutdown(wait=True, cancel_futures=True)
        if self._uploader is not None:
            self._uploader.close(cancel=True)
        for path in self._body_paths:  # bodies of shards whose finishing was cancelled
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._close()

    def _close(self) -> None:
        self._closed = self._stop = True
        self._finisher.shutdown(wait=True)
        if self._uploader is not None:
            self._uploader.close()
        if self._temp_local or (self.store is not None and not self.keep_local):
            shutil.rmtree(self.local, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()


class MDSWriter(Writer):
    """Writes MDS shards: `MDSWriter(out=..., columns={name: encoding}, compression=..., hashes=...)`."""

    format = "mds"
    extra_bytes_per_sample = 4

    @config_errors_as_value_errors
    def __init__(self, *, columns: dict[str, str], out: str | tuple[str, str], **kwargs: Any):
        self.column_names, self.column_encodings, self.column_sizes = mds_columns(columns)
        self.columns = columns
        self.encode_sample = mds_sample_encoder(columns)  # type: ignore[method-assign]
        super().__init__(out=out, **kwargs)
        self.config_data = json.dumps(self.get_config(), sort_keys=True).encode("utf-8")
        self.extra_bytes_per_shard = 4 + 4 + len(self.config_data)
        self._shard_size = self.extra_bytes_per_shard

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(column_names=self.column_names, column_encodings=self.column_encodings,
                      column_sizes=self.column_sizes)
        return config

    def _write_files(self, position: int, body_path: str, sizes: list[int]) -> dict[str, Any]:
        basename = shard_basename(position, "mds")
        # a checked, uncompressed shard's blocks get digests, in the dataset's one file (format.block_digests)
        with_digests = not self.compression and bool(self.hashes)
        raw, record = shard_files.write_mds_file(os.path.join(self.local, basename), self.config_data, sizes,
                                                 body_path, self.hashes, block_digests=with_digests)
        if record is not None:
            self._digest_records[position] = (basename, record)
        raw, zipped = self._finish_file(basename, raw)
        return {"samples": len(sizes), "raw_data": raw, "zip_data": zipped}


class _SplitWriter(Writer):
    newline = "\n"

    def _header(self) -> bytes:
        return b""

    def _write_files(self, position: int, body_path: str, sizes: list[int]) -> dict[str, Any]:
        data_name = shard_basename(position, self.format)
        meta_name = shard_basename(position, self.format, "meta")
        config = json.dumps(self.get_config(), sort_keys=True).encode("utf-8")
        data, meta = shard_files.write_split_files(
            os.path.join(self.local, data_name), os.path.join(self.local, meta_name), self._header(), config,
            sizes, body_path, self.hashes,
        )
        raw_data, zip_data = self._finish_file(data_name, data)
        raw_meta, zip_meta = self._finish_file(meta_name, meta)
        return {"samples": len(sizes), "raw_data": raw_data, "zip_data": zip_data,
                "raw_meta": raw_meta, "zip_meta": zip_meta}


class JSONWriter(_SplitWriter):
    """Writes JSON-lines shards; columns map names to `str`, `int` or `float`."""

    format = "json"

    @config_errors_as_value_errors
    def __init__(self, *, columns: dict[str, str], out: str | tuple[str, str], newline: str = "\n", **kwargs: Any):
        self.columns, self.newline = dict(columns), newline
        self.encode_sample = json_sample_encoder(self.columns, newline)  # type: ignore[method-assign]
        super().__init__(out=out, **kwargs)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(columns=self.columns, newline=self.newline)
        return config


class XSVWriter(_SplitWriter):
    """Writes delimiter-separated shards (a header line, then one line per sample, no quoting)."""

    format = "xsv"

    @config_errors_as_value_errors
    def __init__(self, *, columns: dict[str, str], out: str | tuple[str, str], separator: str | None = None,
                 newline: str = "\n", **kwargs: Any):
        self.separator = separator if separator is not None else getattr(self, "separator", None)
        if not self.separator:
            raise ConfigError("XSVWriter needs a separator")
        self.columns, self.newline = columns, newline
        self.column_names = sorted(columns)
        self.column_encodings = [columns[n] for n in self.column_names]
        self.encode_sample = xsv_sample_encoder(columns, self.separator, newline)  # type: ignore[method-assign]
        super().__init__(out=out, **kwargs)

    def _header(self) -> bytes:
        return (self.separator.join(self.column_names) + self.newline).encode("utf-8")

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(column_names=self.column_names, column_encodings=self.column_encodings,
                      separator=self.separator, newline=self.newline)
        if self.format != "xsv":
            del config["separator"]
        return config


class CSVWriter(XSVWriter):
    format = "csv"
    separator = ","

    def __init__(self, *, columns: dict[str, str], out: str | tuple[str, str], newline: str = "\n", **kwargs: Any):
        super().__init__(columns=columns, out=out, separator=",", newline=newline, **kwargs)


class TSVWriter(XSVWriter):
    format = "tsv"
    separator = "\t"

    def __init__(self, *, columns: dict[str, str], out: str | tuple[str, str], newline: str = "\n", **kwargs: Any):
        super().__init__(columns=columns, out=out, separator="\t", newline=newline, **kwargs)


__all__ = ["CSVWriter", "JSONWriter", "MDSWriter", "TSVWriter", "Writer", "XSVWriter", "parse_size"]
