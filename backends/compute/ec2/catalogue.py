"""A small, editable catalogue of instance types: devices and hourly prices (USD, us-east-1 list
prices; spot is a typical recent price, not a quote).

`gpus` + `gpu_type` in a cluster's options pick the cheapest type here that has them. Edit prices
(or add types) in FOUNDRY_HOME/catalogue/ec2.json, which is merged over this table:
    {"g5.xlarge": {"gpus": 1, "gpu_type": "a10g", "price": 1.006, "spot_price": 0.45}}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from foundry.plugins.errors import ConfigError

BUILTIN: dict[str, dict[str, Any]] = {
    "t3.micro": {"gpus": 0, "gpu_type": None, "price": 0.0104, "spot_price": 0.0035},
    "c6i.2xlarge": {"gpus": 0, "gpu_type": None, "price": 0.34, "spot_price": 0.14},
    "g4dn.xlarge": {"gpus": 1, "gpu_type": "t4", "price": 0.526, "spot_price": 0.22},
    "g5.xlarge": {"gpus": 1, "gpu_type": "a10g", "price": 1.006, "spot_price": 0.45},
    "g5.12xlarge": {"gpus": 4, "gpu_type": "a10g", "price": 5.672, "spot_price": 2.3},
    "g6e.xlarge": {"gpus": 1, "gpu_type": "l40s", "price": 1.861, "spot_price": 0.8},
    "p4d.24xlarge": {"gpus": 8, "gpu_type": "a100", "price": 32.77, "spot_price": 12.0},
    "p5.48xlarge": {"gpus": 8, "gpu_type": "h100", "price": 98.32, "spot_price": 40.0},
}


def catalogue() -> dict[str, dict[str, Any]]:
    table = {k: dict(v) for k, v in BUILTIN.items()}
    home = os.environ.get("FOUNDRY_HOME")
    path = Path(home) / "catalogue" / "ec2.json" if home else None
    if path and path.is_file():
        try:
            edits = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc})", hint="fix or delete it") from None
        for name, entry in (edits or {}).items():
            table[name] = {**table.get(name, {"gpus": 0, "gpu_type": None, "price": 0.0}), **entry}
    return table


def pick(gpus: int, gpu_type: str | None) -> str:
    """The cheapest type with exactly `gpus` GPUs (of `gpu_type` when given)."""
    fits = [(e.get("price", 0.0), name) for name, e in catalogue().items()
            if e.get("gpus") == gpus and (gpu_type is None or (e.get("gpu_type") or "").lower() == gpu_type.lower())]
    if not fits:
        raise ConfigError(f"ec2: no instance type in the catalogue has {gpus} {gpu_type or ''} GPU(s)".replace("  ", " "),
                          hint="give -o instance_type=TYPE, or add one to FOUNDRY_HOME/catalogue/ec2.json")
    return min(fits)[1]


def hourly_price(instance_type: str, spot: bool) -> float:
    entry = catalogue().get(instance_type) or {}
    if spot and entry.get("spot_price") is not None:
        return float(entry["spot_price"])
    return float(entry.get("price") or 0.0)
