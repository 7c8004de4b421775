"""A small, editable catalogue of instance types: devices and hourly prices (USD, us-east-1 list
prices; spot is a typical recent price, not a quote).

`gpus` + `gpu_type` in a cluster's options pick the cheapest type here that has them. Edit prices
(or add types) in FOUNDRY_HOME/catalogue/ec2.json, which is merged over this table (vm/catalogue.py):
    {"g5.xlarge": {"gpus": 1, "gpu_type": "a10g", "price": 1.006, "spot_price": 0.45}}
"""

from __future__ import annotations

from typing import Any

from ..vm.catalogue import Catalogue

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


_CATALOGUE = Catalogue("ec2", BUILTIN, option="instance_type")


def catalogue() -> dict[str, dict[str, Any]]:
    return _CATALOGUE.table()


def pick(gpus: int, gpu_type: str | None) -> str:
    """The cheapest type with exactly `gpus` GPUs (of `gpu_type` when given)."""
    return _CATALOGUE.pick(gpus, gpu_type)


def hourly_price(instance_type: str, spot: bool) -> float:
    return _CATALOGUE.hourly_price(instance_type, spot)
