"""The main job's pieces end to end, tiny: stdlib sources -> MDS shards (file://) -> streamed into
the GPT example -> trained with checkpoints in another URL -> resumed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_prep_train_checkpoint_resume(tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        from examples.gpt.model import GPTConfig
        from examples.gpt.prep import prepare
        from examples.gpt.train import build_trainer
    finally:
        sys.path.remove(str(ROOT))
    data = f"file://{tmp_path}/data"
    counts = prepare(data, max_mb=0.05, block_size=16)
    assert counts["train"] > 100 and counts["val"] >= 1
    cfg = GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32)
    kw = dict(run_name="gpt-test", global_batch=8, save_interval="2ba", eval_interval="2ba", model_cfg=cfg,
              run_dir=str(tmp_path / "run"), device="cpu", progress_bar=False)
    save = f"file://{tmp_path}/ckpt/{{run_name}}"
    build_trainer(data, save, max_duration="3ba", **kw).fit()
    t = build_trainer(data, save, max_duration="4ba", autoresume=True, save_overwrite=False, **kw)
    t.resume()
    assert t.checkpoints.resumed_from == "ep0-ba3"
    t.fit()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]
    assert any("eval/loss" in r for r in rows)
    assert (tmp_path / "ckpt" / "gpt-test" / "latest").exists()
