"""A small, editable catalogue of machine types per cloud: devices and hourly prices (USD).

Each provider ships its table (ec2/catalogue.py, gce/catalogue.py, oci_vm/catalogue.py);
FOUNDRY_HOME/catalogue/PROVIDER.json is merged over it, so a user fixes a price or adds a type
without touching code:  {"g2-standard-8": {"gpus": 1, "gpu_type": "l4", "price": 0.85}}
`gpus` + `gpu_type` in a cluster's options pick the cheapest type with exactly that many.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from foundry.plugins.errors import ConfigError


class Catalogue:
    def __init__(self, provider: str, builtin: dict[str, dict[str, Any]], option: str = "instance_type"):
        self.provider, self.builtin, self.option = provider, builtin, option

    def path(self) -> Path | None:
        home = os.environ.get("FOUNDRY_HOME")
        return Path(home) / "catalogue" / f"{self.provider}.json" if home else None

    def table(self) -> dict[str, dict[str, Any]]:
        table = {k: dict(v) for k, v in self.builtin.items()}
        path = self.path()
        if path and path.is_file():
            try:
                edits = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path} is not valid JSON ({exc})", hint="fix or delete it") from None
            for name, entry in (edits or {}).items():
                table[name] = {**table.get(name, {"gpus": 0, "gpu_type": None, "price": 0.0}), **entry}
        return table

    def entry(self, name: str) -> dict[str, Any]:
        return self.table().get(name) or {}

    def pick(self, gpus: int, gpu_type: str | None) -> str:
        """The cheapest type with exactly `gpus` GPUs (of `gpu_type` when given)."""
        fits = [(e.get("price", 0.0), name) for name, e in self.table().items()
                if e.get("gpus") == gpus and (gpu_type is None or (e.get("gpu_type") or "").lower() == gpu_type.lower())]
        if not fits:
            what = f"{gpus} {gpu_type} GPU(s)" if gpu_type else f"{gpus} GPU(s)"
            raise ConfigError(f"{self.provider}: no {self.option.replace('_', ' ')} in the catalogue has {what}",
                              hint=f"give -o {self.option}=TYPE, or add one to FOUNDRY_HOME/catalogue/{self.provider}.json")
        return min(fits)[1]

    def hourly_price(self, name: str, spot: bool) -> float:
        entry = self.entry(name)
        if spot and entry.get("spot_price") is not None:
            return float(entry["spot_price"])
        return float(entry.get("price") or 0.0)
