"""Random planning cases for the mosaic comparison, and Foundry's answer to each."""

from __future__ import annotations

import random

import numpy as np

from foundry.streaming.plan import OrderConfig, WorldShape, epoch_work, make_layout, partition, shard_choose, \
    shuffle_positions, stream_choose, stream_proportions

ALGOS = ["py1e", "py1br", "py1s", "py2s", "naive"]


def _divides_either(c, p):
    return (p <= c and c % p == 0) or (p > c and p % c == 0)


def work_case(rnd: random.Random, **fixed) -> dict:
    n_streams = rnd.choice([1, 1, 2, 3])
    shards = [[rnd.randint(1, 40) for _ in range(rnd.randint(1, 8))] for _ in range(n_streams)]
    mode = rnd.choice(["none", "none", "proportion", "repeat", "choose", "epoch_size"]) if n_streams > 1 else \
        rnd.choice(["none", "none", "epoch_size", "repeat"])
    weights = [{"proportion": None, "repeat": None, "choose": None} for _ in shards]
    epoch_size = None
    for w, s in zip(weights, shards):
        if mode == "proportion":
            w["proportion"] = rnd.choice([0.5, 1, 2, 3.5])
        elif mode == "repeat":
            w["repeat"] = rnd.choice([None, 0.5, 1.5, 2, 0.3])
        elif mode == "choose":
            w["choose"] = rnd.choice([None, rnd.randint(1, 3 * sum(s))])
    if mode in ("proportion", "epoch_size"):
        epoch_size = rnd.choice([None, rnd.randint(10, 300)]) if mode == "proportion" else rnd.randint(10, 300)
    p, r, w = rnd.choice([1, 1, 2, 4]), rnd.choice([1, 2, 3]), rnd.choice([1, 2])
    c = rnd.choice([x for x in (1, 2, 3, 4, 8) if _divides_either(x, p)])
    case = dict(kind="work", shards=shards, weights=weights, epoch_size=epoch_size, seed=rnd.randint(0, 10**6),
                sampling_method=rnd.choice(["balanced", "fixed"]), granularity=rnd.choice([1, 1, 3]),
                shuffle=rnd.random() < 0.85, algo=rnd.choice(ALGOS), block=rnd.choice([8, 30, 100, 1 << 18]),
                c=c, p=p, r=r, w=w, b=rnd.choice([1, 2, 4]), epoch=rnd.randint(0, 2), drop=0, initial=None,
                partition_algo=rnd.choice(["relaxed", "orig"]))
    case.update(fixed)
    return case


def foundry_answer(case: dict) -> dict:
    try:
        kind = case["kind"]
        if kind == "shuffle":
            res = shuffle_positions(case["algo"], np.array(case["units"]), case["c"], case["seed"], case["epoch"],
                                    case["block"])
        elif kind == "partition":
            res = partition(case["algo"], case["n"], case["c"], WorldShape(case["p"], case["r"], case["w"]), case["b"],
                            case.get("drop", 0), case.get("initial"))
        elif kind == "sampling":
            res = shard_choose(np.array(case["sizes"]), case["choose"], case["g"], case["seed"], case["epoch"],
                               case["use_epoch"])
        else:
            per_stream = [sum(s) for s in case["shards"]]
            ws = case["weights"]
            choose = stream_choose(per_stream, [w["proportion"] for w in ws], [w["repeat"] for w in ws],
                                   [w["choose"] for w in ws], case["epoch_size"], case["seed"])
            shares = stream_proportions(per_stream, [w["proportion"] for w in ws], choose, case["epoch_size"])
            cfg = OrderConfig(seed=case["seed"], shuffle=case["shuffle"], algo=case["algo"], block_size=case["block"],
                              num_canonical_nodes=case["c"], batch_size=case["b"], partition_algo=case["partition_algo"],
                              sampling_method=case["sampling_method"], sampling_granularity=case["granularity"],
                              initial_physical_nodes=case["initial"], batching_method=case.get("batching", "random"))
            res = epoch_work(make_layout(case["shards"], choose, shares.tolist()), cfg, WorldShape(case["p"], case["r"], case["w"]),
                             case["epoch"], case["drop"])
    except Exception as e:  # noqa: BLE001 - refusals are compared too
        return {"error": f"{type(e).__name__}: {e}"}
    res = np.asarray(res)
    return {"shape": list(res.shape), "ids": res.reshape(-1).tolist()}
