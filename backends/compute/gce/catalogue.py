"""GCE machine types Foundry knows: devices and hourly prices (USD, us-central1 list prices; spot is a
typical recent price, not a quote). `accelerator`: the GPU attached to an N1 machine through
guestAccelerators; A2/A3/G2 types come with theirs. Edit or add in FOUNDRY_HOME/catalogue/gce.json
(vm/catalogue.py): {"g2-standard-8": {"gpus": 1, "gpu_type": "l4", "price": 0.85, "spot_price": 0.34}}
"""

from __future__ import annotations

from typing import Any

from ..vm.catalogue import Catalogue

BUILTIN: dict[str, dict[str, Any]] = {
    "e2-small": {"gpus": 0, "gpu_type": None, "price": 0.0168, "spot_price": 0.005},
    "n2-standard-8": {"gpus": 0, "gpu_type": None, "price": 0.389, "spot_price": 0.094},
    "n1-standard-8": {"gpus": 1, "gpu_type": "t4", "accelerator": "nvidia-tesla-t4", "price": 0.73,
                      "spot_price": 0.20},
    "g2-standard-8": {"gpus": 1, "gpu_type": "l4", "price": 0.854, "spot_price": 0.34},
    "g2-standard-48": {"gpus": 4, "gpu_type": "l4", "price": 4.0, "spot_price": 1.6},
    "a2-highgpu-1g": {"gpus": 1, "gpu_type": "a100", "price": 3.67, "spot_price": 1.47},
    "a2-highgpu-8g": {"gpus": 8, "gpu_type": "a100", "price": 29.39, "spot_price": 11.76},
    "a3-highgpu-8g": {"gpus": 8, "gpu_type": "h100", "price": 88.25, "spot_price": 35.3},
}

CATALOGUE = Catalogue("gce", BUILTIN, option="machine_type")
