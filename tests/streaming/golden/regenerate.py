"""Rewrite order_seed1234.json from the real mosaicml-streaming 0.13 (the peer venv of
tests/support/peers.py): `python tests/streaming/golden/regenerate.py`. Only on purpose: the golden
order is what resumed runs rely on."""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.support.peers import mosaic_python  # noqa: E402

CASE = {"kind": "work", "shards": [[7, 9, 12, 5, 16, 3], [11, 8, 13]], "epoch_size": 100, "seed": 1234,
        "weights": [{"proportion": 3, "repeat": None, "choose": None}, {"proportion": 1, "repeat": None, "choose": None}],
        "sampling_method": "balanced", "granularity": 1, "shuffle": True, "block": 32, "c": 2, "p": 1, "r": 1, "w": 1,
        "b": 8, "drop": 0, "initial": None, "partition_algo": "relaxed"}
ALGOS = ["py1e", "py1br", "py1s", "py2s", "naive"]

cases = [dict(CASE, algo=a, epoch=e) for a in ALGOS for e in (0, 1)]
out = subprocess.run([str(mosaic_python()), "-I", "-c", (HERE.parent / "mosaic_orders.py").read_text()],
                     input=json.dumps(cases), capture_output=True, text=True, check=True).stdout
orders = {}
for case, res in zip(cases, json.loads(out)):
    ids = [i for i in res["ids"] if i != -1]
    orders[f"{case['algo']}/{case['epoch']}"] = ids
golden = {"source": "mosaicml-streaming 0.13.0 (tests/streaming/golden/regenerate.py)",
          "case": {k: v for k, v in CASE.items() if k != "kind"}, "orders": orders}
(HERE / "order_seed1234.json").write_text(json.dumps(golden, indent=1) + "\n")
print(f"wrote {len(orders)} orders")
