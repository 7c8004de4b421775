"""Sources `foundry dataset convert` reads: JSON lines, CSV/TSV, and image folders (one sub-folder
per class). Each source is split into contiguous parts (byte ranges of a text file, runs of image
files) so parallel workers convert disjoint slices in the original order.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.errors import ConfigError, DataError

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
_SNIFF_ROWS = 1000


@dataclass
class Part:
    """One worker's slice of the source: byte range [start, end) or a list of (path, label)."""

    kind: str
    path: str
    start: int = 0
    end: int = 0
    files: list[tuple[str, int, str]] = field(default_factory=list)
    separator: str = ","


def detect_kind(src: str) -> str:
    path = Path(src)
    if path.is_dir():
        if any(p.is_dir() for p in path.iterdir()):
            return "images"
        raise ConfigError(f"{src} has no class sub-folders", hint="expected SRC/CLASS/IMAGE files")
    if not path.is_file():
        raise ConfigError(f"source {src} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    raise ConfigError(f"cannot tell the format of {src}", hint="use .jsonl, .csv, .tsv or a folder of class folders")


# ---- schema -------------------------------------------------------------------------------------
def _json_type(value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        return "json"
    if isinstance(value, int):
        return "int" if -(1 << 63) <= value < 1 << 63 else "str_int"
    if isinstance(value, float):
        return "float64"
    return "str"


def _widen(a: str | None, b: str) -> str:
    if a is None or a == b:
        return b
    if {a, b} == {"int", "float64"}:
        return "float64"
    return "json"


def _text_type(value: str) -> str:
    try:
        int(value)
        return "int"
    except ValueError:
        pass
    try:
        float(value)
        return "float64"
    except ValueError:
        return "str"


def infer_columns(kind: str, src: str) -> dict[str, str]:
    """Column encodings from the first rows (JSON types, or what CSV text parses as)."""
    if kind == "images":
        return {"image": _image_encoding(list_images(src)), "label": "int", "class_name": "str"}
    types: dict[str, str | None] = {}
    for i, row in enumerate(_rows(Part(kind, src, 0, os.path.getsize(src), separator=_sep(kind)), raw=True)):
        if i >= _SNIFF_ROWS:
            break
        for key, value in row.items():
            if kind == "jsonl":
                types[key] = _widen(types.get(key), _json_type(value))
            else:
                t = _text_type(value)
                old = types.get(key)
                types[key] = t if old is None or old == t else ("float64" if {old, t} == {"int", "float64"} else "str")
    if not types:
        raise DataError(f"{src} holds no rows")
    return {k: v or "json" for k, v in types.items()}


def _sep(kind: str) -> str:
    return "\t" if kind == "tsv" else ","


# ---- images -------------------------------------------------------------------------------------
def list_images(src: str) -> list[tuple[str, int, str]]:
    """(path, label, class name) for every image, classes sorted by name, files sorted in a class."""
    root = Path(src)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files = []
    for label, name in enumerate(classes):
        for dirpath, dirnames, filenames in os.walk(root / name):
            dirnames.sort()
            for f in sorted(filenames):
                if Path(f).suffix.lower() in IMAGE_EXTENSIONS:
                    files.append((os.path.join(dirpath, f), label, name))
    if not files:
        raise DataError(f"{src} holds no images", hint=f"extensions: {', '.join(sorted(IMAGE_EXTENSIONS))}")
    return files


def _image_encoding(files: list[tuple[str, int, str]]) -> str:
    suffixes = {Path(p).suffix.lower() for p, _, _ in files}
    return "png" if suffixes == {".png"} else "jpeg"


# ---- splitting and reading -----------------------------------------------------------------------
def split(kind: str, src: str, parts: int) -> list[Part]:
    if kind == "images":
        files = list_images(src)
        n = max(1, min(parts, len(files)))
        bounds = [len(files) * i // n for i in range(n + 1)]
        return [Part(kind, src, files=files[a:b]) for a, b in zip(bounds, bounds[1:])]
    size = os.path.getsize(src)
    if kind != "jsonl":
        with open(src, "rb") as f:
            header_end = len(f.readline())
            if parts > 1 and b'"' in f.read():  # quoted fields may hold newlines: never split them
                parts = 1
    else:
        header_end = 0
    cuts = [header_end]
    with open(src, "rb") as f:
        for i in range(1, parts):
            f.seek(max(cuts[-1], header_end + (size - header_end) * i // parts))
            f.readline()  # move to the start of the next line
            cuts.append(max(f.tell(), cuts[-1]))
    cuts.append(size)
    return [Part(kind, src, a, b, separator=_sep(kind)) for a, b in zip(cuts, cuts[1:]) if b > a or parts == 1]


def _rows(part: Part, raw: bool = False) -> Iterator[dict[str, Any]]:
    with open(part.path, "rb") as f:
        if part.kind == "jsonl":
            f.seek(part.start)
            pos = part.start
            for line in f:
                if pos >= part.end:
                    break
                pos += len(line)
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError as exc:
                        raise DataError(f"{part.path}: invalid JSON line near byte {pos}: {exc}") from None
            return
        header = next(csv.reader([f.readline().decode("utf-8")], delimiter=part.separator))
        start = max(part.start, f.tell())
        f.seek(start)
        text = io.TextIOWrapper(io.BytesIO(f.read(part.end - start)), encoding="utf-8", newline="")
        for values in csv.reader(text, delimiter=part.separator):
            if values:
                yield dict(zip(header, values))


def samples(part: Part, columns: dict[str, str]) -> Iterator[dict[str, Any]]:
    """The part's rows as samples for `columns` (CSV text converted to the column types)."""
    if part.kind == "images":
        for path, label, name in part.files:
            with open(path, "rb") as f:
                data = f.read()
            if columns["image"] == "jpeg" and Path(path).suffix.lower() not in (".jpg", ".jpeg"):
                data = _to_jpeg(data)
            yield {"image": data, "label": label, "class_name": name}
        return
    convert = {"int": int, "float64": float, "str_int": int}
    for row in _rows(part):
        if part.kind != "jsonl":
            row = {k: convert.get(columns.get(k, "str"), str)(v) for k, v in row.items()}
        missing = [c for c in columns if c not in row]
        if missing:
            raise DataError(f"{part.path}: a row has no {missing[0]!r}", hint="pass --columns to choose the columns")
        yield row


def _to_jpeg(data: bytes) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").save(out, format="JPEG", quality=95)
    return out.getvalue()
