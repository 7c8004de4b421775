"""OCI shapes Foundry knows: devices and hourly prices (USD list prices; preemptible capacity is
billed at half). Flexible shapes (".Flex") are priced per OCPU and GB of memory, from the cluster's
`ocpus` / `memory_gb`. Edit or add in FOUNDRY_HOME/catalogue/oci-vm.json (vm/catalogue.py):
{"VM.GPU.A10.1": {"gpus": 1, "gpu_type": "a10", "price": 2.0, "spot_price": 1.0}}
"""

from __future__ import annotations

from typing import Any

from ..vm.catalogue import Catalogue

BUILTIN: dict[str, dict[str, Any]] = {
    "VM.Standard.E4.Flex": {"gpus": 0, "gpu_type": None, "price_per_ocpu": 0.025, "price_per_gb": 0.0015},
    "VM.Standard.E5.Flex": {"gpus": 0, "gpu_type": None, "price_per_ocpu": 0.03, "price_per_gb": 0.002},
    "VM.GPU2.1": {"gpus": 1, "gpu_type": "p100", "price": 1.275, "spot_price": 0.6375},
    "VM.GPU3.1": {"gpus": 1, "gpu_type": "v100", "price": 2.95, "spot_price": 1.475},
    "VM.GPU.A10.1": {"gpus": 1, "gpu_type": "a10", "price": 2.0, "spot_price": 1.0},
    "VM.GPU.A10.2": {"gpus": 2, "gpu_type": "a10", "price": 4.0, "spot_price": 2.0},
    "BM.GPU.A10.4": {"gpus": 4, "gpu_type": "a10", "price": 8.0, "spot_price": 4.0},
    "BM.GPU.A100-v2.8": {"gpus": 8, "gpu_type": "a100", "price": 32.0, "spot_price": 16.0},
    "BM.GPU.H100.8": {"gpus": 8, "gpu_type": "h100", "price": 80.0, "spot_price": 40.0},
}

CATALOGUE = Catalogue("oci-vm", BUILTIN, option="shape")


def flex_price(shape: str, ocpus: float, memory_gb: float, preemptible: bool) -> float:
    entry = CATALOGUE.entry(shape)
    price = ocpus * float(entry.get("price_per_ocpu") or 0.0) + memory_gb * float(entry.get("price_per_gb") or 0.0)
    return price / 2 if preemptible else price
