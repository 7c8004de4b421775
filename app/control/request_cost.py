"""Requests per store and their cost: object stores bill requests by class as well as bytes (S3 and
GCS: PUT/COPY/POST/LIST vs GET/HEAD; R2: class A vs class B). The counts come from the same
per-process records as the egress bytes (plugins/transfers.py: `put_list` and `get` beside `read`
and `written`), never from logs. Prices are USD per 1000 requests, editable in the same table as
egress and compute, FOUNDRY_HOME/prices.yaml:

    request_usd_per_1000: {s3: {put_list: 0.005, get: 0.0004}}
    request_stores: {s3://my-r2-bucket: {put_list: 0.0045, get: 0.00036}}   # R2 behind s3://
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from foundry.plugins.errors import ConfigError

from .egress import read_records

CLASSES = ("put_list", "get")
# list prices: S3 Standard, R2 (class A $4.50 / class B $0.36 per million), GCS Standard (class A/B),
# OCI Object Storage ($0.0034 per 10,000 beyond the free tier, either class); local folders: free
DEFAULT_PRICES = {"s3": {"put_list": 0.005, "get": 0.0004}, "r2": {"put_list": 0.0045, "get": 0.00036},
                  "gs": {"put_list": 0.005, "get": 0.0004}, "oci": {"put_list": 0.00034, "get": 0.00034},
                  "file": {"put_list": 0.0, "get": 0.0}}
HINT = "request_usd_per_1000: {s3: {put_list: 0.005, get: 0.0004}}  (USD per 1000 requests)"


def _table(raw: Any, path: Path) -> dict[str, dict[str, float]]:
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ConfigError(f"{path}: request prices must map a store to {{put_list: USD, get: USD}}", hint=HINT)
    return {str(k): {c: float(v.get(c, 0.0)) for c in CLASSES} for k, v in raw.items()}


def load_prices(home: Path) -> dict[str, Any]:
    prices: dict[str, Any] = {"schemes": {k: dict(v) for k, v in DEFAULT_PRICES.items()}, "stores": {}}
    path = Path(home) / "prices.yaml"
    if path.exists():
        try:
            raw = yaml.safe_load(path.read_text()) or {}
            prices["schemes"].update(_table(raw.get("request_usd_per_1000") or {}, path))
            prices["stores"].update(_table(raw.get("request_stores") or {}, path))
        except (yaml.YAMLError, AttributeError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: not a price table ({exc})", hint=HINT) from None
    return prices


def price_of(store: str, prices: dict[str, Any]) -> dict[str, float]:
    if store in prices["stores"]:
        return prices["stores"][store]
    return prices["schemes"].get(store.split("://", 1)[0], {c: 0.0 for c in CLASSES})


def summarize(run_dir: Path, prices: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{resumption: {"stores": {store: {put_list, get, usd}}, "usd"}} from every process's record."""
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for record in read_records(run_dir):
        idx = str(int(record.get("resumption") or 0))
        for store, purposes in record["stores"].items():
            slot = counts.setdefault(idx, {}).setdefault(store, {c: 0 for c in CLASSES})
            for per in (purposes or {}).values():
                for c in CLASSES:
                    slot[c] += int((per or {}).get(c, 0))
    out: dict[str, dict[str, Any]] = {}
    for idx, stores in sorted(counts.items(), key=lambda kv: int(kv[0])):
        rows = {}
        for store, n in stores.items():
            price = price_of(store, prices)
            rows[store] = {**n, "usd": round(sum(n[c] / 1000 * price[c] for c in CLASSES), 6)}
        out[idx] = {"stores": rows, "usd": round(sum(r["usd"] for r in rows.values()), 6)}
    return out


def request_line(idx: str, entry: dict[str, Any]) -> str:
    parts = [f"{store} {n['put_list']} PUT/LIST + {n['get']} GET = ${n['usd']:.6f}" for store, n in entry["stores"].items()]
    return f"resumption {idx} requests: {'; '.join(parts) or 'none'}"
