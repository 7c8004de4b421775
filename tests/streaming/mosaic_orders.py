"""Peer script (runs next to mosaicml-streaming 0.13): reads JSON cases on stdin, prints JSON
results computed by mosaic's own planning functions. One process answers many cases."""

import json
import sys
import warnings

import numpy as np

from streaming.base.partition import get_partitions
from streaming.base.sampling import get_sampling
from streaming.base.shuffle import get_shuffle

warnings.simplefilter("ignore")
out = []
for case in json.load(sys.stdin):
    kind = case.pop("kind")
    if kind == "shuffle":
        res = get_shuffle(case["algo"], np.array(case["units"], np.int64), case["c"], case["seed"], case["epoch"],
                          case["block"])
    elif kind == "partition":
        res = get_partitions(case["algo"], case["n"], case["c"], case["p"], case["r"], case["w"], case["b"],
                             case.get("drop", 0), case.get("initial"))
        res = {"shape": list(res.shape), "ids": res.reshape(-1).tolist()}
    elif kind == "sampling":
        res = get_sampling(np.array(case["sizes"], np.int64), case["choose"], case["g"], case["seed"], case["epoch"],
                           case["use_epoch"])
    out.append(res if isinstance(res, dict) else np.asarray(res).tolist())
json.dump(out, sys.stdout)
