"""Egress accounting: bytes each node of a run read from and wrote to each store, per resumption, from
the per-process records the storage layer keeps in the run directory (plugins/transfers.py), and an
estimated transfer cost from a small price table.

Prices are USD per GB read out of a store (internet egress; writes into a store are free on every
provider listed). Edit them in FOUNDRY_HOME/prices.yaml:

    egress_usd_per_gb: {s3: 0.09, r2: 0.0, gs: 0.12, oci: 0.0085, file: 0.0}
    stores: {s3://my-r2-bucket: 0.0}          # optional: a price for one store (e.g. R2 behind s3://)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from foundry.plugins.errors import ConfigError

# AWS S3 internet egress (first 10 TB/month), Cloudflare R2 (no egress fees), GCS standard internet
# egress, OCI beyond the free 10 TB; local folders cost nothing.
DEFAULT_PRICES = {"s3": 0.09, "r2": 0.0, "gs": 0.12, "oci": 0.0085, "file": 0.0}
PURPOSES = ("data", "checkpoint", "upload", "other")
GB = 1e9


def _empty() -> dict[str, Any]:
    return {p: {"read": 0, "written": 0} for p in PURPOSES} | {"stores": {}}


def _add(into: dict[str, Any], store: str, purpose: str, read: int, written: int) -> None:
    purpose = purpose if purpose in PURPOSES else "other"
    into[purpose]["read"] += read
    into[purpose]["written"] += written
    per = into["stores"].setdefault(store, {})
    slot = per.setdefault(purpose, {"read": 0, "written": 0})
    slot["read"] += read
    slot["written"] += written


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every process's record (a partial or foreign file is skipped, never fatal)."""
    records = []
    for path in sorted((Path(run_dir) / "egress").glob("r*/*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("stores"), dict):
            records.append(record)
    return records


def load_prices(home: Path) -> dict[str, Any]:
    prices: dict[str, Any] = {"egress_usd_per_gb": dict(DEFAULT_PRICES), "stores": {}}
    path = Path(home) / "prices.yaml"
    if path.exists():
        try:
            raw = yaml.safe_load(path.read_text()) or {}
            prices["egress_usd_per_gb"].update({str(k): float(v) for k, v in (raw.get("egress_usd_per_gb") or {}).items()})
            prices["stores"].update({str(k): float(v) for k, v in (raw.get("stores") or {}).items()})
        except (yaml.YAMLError, AttributeError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: not a price table ({exc})",
                              hint="egress_usd_per_gb: {s3: 0.09, r2: 0.0}  (USD per GB read out of a store)") from None
    return prices


def price_of(store: str, prices: dict[str, Any]) -> float:
    if store in prices["stores"]:
        return prices["stores"][store]
    return prices["egress_usd_per_gb"].get(store.split("://", 1)[0], 0.0)


def summarize(run_dir: Path, prices: dict[str, Any]) -> dict[str, Any]:
    """{"resumptions": {idx: {node: usage}}, "nodes": {node: usage}, "total": usage, "cost": {...}}
    where usage = {data|checkpoint|upload|other: {read, written}, stores: {store: {purpose: {read, written}}}}."""
    per_res: dict[int, dict[str, Any]] = {}
    nodes: dict[str, Any] = {}
    total = _empty()
    for record in read_records(run_dir):
        idx, node = int(record.get("resumption") or 0), str(record.get("node") or "?")
        for store, purposes in record["stores"].items():
            for purpose, counts in (purposes or {}).items():
                read, written = int(counts.get("read", 0)), int(counts.get("written", 0))
                for into in (per_res.setdefault(idx, {}).setdefault(node, _empty()),
                             nodes.setdefault(node, _empty()), total):
                    _add(into, store, purpose, read, written)
    by_store = {}
    for store, purposes in total["stores"].items():
        read = sum(c["read"] for c in purposes.values())
        by_store[store] = {"read_bytes": read, "usd_per_gb": price_of(store, prices),
                           "usd": round(read / GB * price_of(store, prices), 6)}
    cost = {"usd": round(sum(s["usd"] for s in by_store.values()), 6), "stores": by_store,
            "note": "estimate: bytes read out of each store x its egress price (FOUNDRY_HOME/prices.yaml)"}
    return {"resumptions": {str(k): v for k, v in sorted(per_res.items())}, "nodes": nodes, "total": total,
            "cost": cost}


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 10_000 else f"{n} B"


def rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One table row per (resumption, node): data and checkpoint bytes apart."""
    out = []
    for idx, per_node in summary["resumptions"].items():
        for node, usage in sorted(per_node.items()):
            out.append({"#": int(idx), "node": node,
                        "data read": _mb(usage["data"]["read"]),
                        "ckpt read": _mb(usage["checkpoint"]["read"]),
                        "ckpt written": _mb(usage["checkpoint"]["written"]),
                        "other": _mb(usage["upload"]["written"] + usage["other"]["read"] + usage["other"]["written"])})
    return out


def cost_line(summary: dict[str, Any]) -> str:
    parts = [f"{store} {_mb(c['read_bytes'])} x ${c['usd_per_gb']}/GB" for store, c in summary["cost"]["stores"].items()]
    return f"estimated transfer cost ${summary['cost']['usd']:.4f} ({'; '.join(parts) or 'no transfers'})"
