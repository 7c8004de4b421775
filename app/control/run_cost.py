"""Cost per run: compute per resumption plus the storage transfers already measured (egress.py).

Compute: a provider that makes machines records its price in the job handle (ec2:
`price_per_hour` for all its instances together, from its catalogue, spot or on-demand), billed for
the resumption's wall time (started -> ended, or now while it runs). Any other cluster (local,
slurm, ssh, kubernetes) costs `compute_usd_per_gpu_hour` x its devices, from the same editable price
table as egress, FOUNDRY_HOME/prices.yaml (default 0: a machine you already have):

    compute_usd_per_gpu_hour: {fleet: 1.2, hpc: 0.0}     # per cluster name
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from foundry.plugins.errors import ConfigError


def cluster_prices(home: Path) -> dict[str, float]:
    path = Path(home) / "prices.yaml"
    if not path.exists():
        return {}
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        return {str(k): float(v) for k, v in (raw.get("compute_usd_per_gpu_hour") or {}).items()}
    except (yaml.YAMLError, AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a price table ({exc})",
                          hint="compute_usd_per_gpu_hour: {my-cluster: 1.2}  (USD per device-hour)") from None


def resumption_compute(res: Any, handle: dict | None, per_gpu_hour: dict[str, float],
                       now: float | None = None) -> dict[str, Any]:
    """{"hours", "usd_per_hour", "usd", "basis"} for one resumption."""
    start = res.started_at
    end = res.ended_at or (now if now is not None else time.time())
    hours = max(0.0, end - start) / 3600 if start is not None else 0.0
    data = (handle or {}).get("data") or {}
    if data.get("price_per_hour") is not None:
        rate = float(data["price_per_hour"])
        basis = f"{data.get('instances', 1)} x {data.get('instance_type', 'instance')}" + \
            (" spot" if data.get("spot") else "") + " (catalogue)"
    else:
        rate = per_gpu_hour.get(res.cluster, 0.0) * res.devices
        basis = f"{res.devices} device(s) x ${per_gpu_hour.get(res.cluster, 0.0)}/h (prices.yaml)"
    return {"hours": round(hours, 4), "usd_per_hour": round(rate, 6), "usd": round(hours * rate, 6), "basis": basis}


def run_cost(run: Any, handles: dict[int, dict | None], per_gpu_hour: dict[str, float], egress: dict[str, Any],
             now: float | None = None, requests: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per resumption and in total: compute, transfer and request cost (egress: egress.summarize's
    result; requests: request_cost.summarize's, per resumption)."""
    per_res = {str(r.index): resumption_compute(r, handles.get(r.index), per_gpu_hour, now) for r in run.resumptions}
    for idx, entry in per_res.items():
        entry["requests"] = (requests or {}).get(idx, {"stores": {}, "usd": 0.0})
    compute = round(sum(c["usd"] for c in per_res.values()), 6)
    transfer = float((egress.get("cost") or {}).get("usd") or 0.0)
    request_usd = round(sum(c["requests"]["usd"] for c in per_res.values()), 6)
    return {"resumptions": per_res, "compute_usd": compute, "transfer_usd": transfer, "requests_usd": request_usd,
            "total_usd": round(compute + transfer + request_usd, 6)}


def cost_line(cost: dict[str, Any]) -> str:
    return (f"estimated cost ${cost['total_usd']:.4f}: compute ${cost['compute_usd']:.4f} + "
            f"transfers ${cost['transfer_usd']:.4f} + requests ${cost.get('requests_usd', 0.0):.4f}")
