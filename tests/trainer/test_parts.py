"""The trainer's small parts: topology detection, parallelism choice, microbatching with 'auto'
OOM halving, precision checks, seeding, loggers, the pause signal handler."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

from foundry.plugins.errors import ConfigError
from foundry.trainer import Trainer
from foundry.trainer.dist import DistEnv, choose_parallelism
from foundry.trainer.loggers import ConsoleLogger, JSONLinesLogger
from foundry.trainer.microbatch import MicrobatchRunner, split_batch
from foundry.trainer.precision import check_precision
from foundry.trainer.seeding import load_rng_state, rng_state, seed_everything
from foundry.trainer.signals import PauseRequest


def test_dist_env_detect_from_torchrun_variables():
    env = DistEnv.detect({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                          "RESUMPTION_INDEX": "3"})
    assert (env.rank, env.world_size, env.local_rank, env.resumption_index, env.distributed) == (1, 4, 1, 3, True)
    assert DistEnv.detect({}) == DistEnv()
    with pytest.raises(ConfigError):
        DistEnv.detect({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(ConfigError):
        DistEnv.detect({"WORLD_SIZE": "two"})


def test_parallelism_selection():
    assert choose_parallelism("auto", "cpu", 1) == "none"
    assert choose_parallelism("auto", "cpu", 2) == "ddp"
    assert choose_parallelism("auto", "cuda", 8) == "ddp"
    assert choose_parallelism("fsdp", "cuda", 8) == "fsdp"
    assert choose_parallelism("fsdp", "cuda", 1) == "fsdp"
    assert choose_parallelism("fsdp", "cpu", 2) == "fsdp"  # FSDP2 runs on CPU with gloo
    with pytest.raises(ConfigError):
        choose_parallelism("zero3", "cuda", 2)


def test_precision_checks():
    assert check_precision("bf16", torch.device("cpu")) == "bf16"
    with pytest.raises(ConfigError):
        check_precision("fp16", torch.device("cpu"))
    with pytest.raises(ConfigError):
        check_precision("fp8", torch.device("cpu"))


def test_split_batch_handles_dicts_and_tuples():
    batch = {"x": torch.arange(10), "y": (torch.arange(10), torch.zeros(10, 2))}
    parts = split_batch(batch, 4)
    assert [p["x"].tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert parts[2]["y"][1].shape == (2, 2)


class OOMAbove(torch.nn.Module):
    """Raises torch.OutOfMemoryError for microbatches larger than `limit` (CPU stand-in for a GPU OOM)."""

    def __init__(self, limit: int):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)
        self.limit, self.sizes = limit, []

    def forward(self, x):
        self.sizes.append(x.shape[0])
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return self.lin(x)


def test_auto_microbatch_halves_on_oom_and_retries_the_same_batch():
    torch.manual_seed(0)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    model = OOMAbove(limit=5)
    runner = MicrobatchRunner("auto", lambda b: torch.nn.functional.mse_loss(model(b[0]), b[1]), model)
    loss = runner.run((x, y), model.zero_grad)
    assert runner.size == 4 and model.sizes[:3] == [16, 8, 4]
    grad_auto = model.lin.weight.grad.clone()
    model.zero_grad()
    full = torch.nn.functional.mse_loss(model.lin(x), y)
    full.backward()
    torch.testing.assert_close(loss, full.detach())
    torch.testing.assert_close(grad_auto, model.lin.weight.grad)  # accumulation == the whole batch


def test_fixed_microbatch_does_not_swallow_oom():
    model = OOMAbove(limit=1)
    runner = MicrobatchRunner(2, lambda b: model(b).sum(), model)
    with pytest.raises(torch.OutOfMemoryError):
        runner.run(torch.randn(4, 4), model.zero_grad)


def test_trainer_with_auto_microbatch_trains(tmp_path):
    model = OOMAbove(limit=3)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    t = Trainer(run_name="oom", model=model, train_dataloader=data, max_duration="3ba", device="cpu",
                loss_fn=torch.nn.functional.mse_loss, device_train_microbatch_size="auto",
                run_dir=str(tmp_path), progress_bar=False).fit()
    assert t.runner.size == 2 and t.timestamp.batch == 3 and t.timestamp.sample == 24


def test_seeding_and_rng_state_roundtrip():
    seed_everything(5)
    state = rng_state()
    a = (torch.rand(3), __import__("random").random(), __import__("numpy").random.rand())
    load_rng_state(state)
    b = (torch.rand(3), __import__("random").random(), __import__("numpy").random.rand())
    assert torch.equal(a[0], b[0]) and a[1:] == b[1:]


def test_loggers_json_lines_and_plain_console(tmp_path):
    jl = JSONLinesLogger(tmp_path / "m" / "metrics.jsonl")
    jl.log_metrics({"loss": 1.5, "lr": 0.1}, step=1)
    jl.close()
    row = json.loads((tmp_path / "m" / "metrics.jsonl").read_text())
    assert row["step"] == 1 and row["loss"] == 1.5 and "time" in row
    out = io.StringIO()
    console = ConsoleLogger(total_batches=4, interval=2, stream=out)
    for step in range(1, 5):
        console.log_metrics({"loss": 1.0 / step}, step)
    # off a terminal, lines come by time (tests/trainer/test_progress_lines.py): the first and the last here
    assert out.getvalue().splitlines() == ["step 1/4: loss=1", "step 4/4: loss=0.25"]


def test_trainer_config_errors_are_clear(tmp_path):
    model = torch.nn.Linear(2, 1)
    kwargs = dict(run_name="x", model=model, train_dataloader=[], device="cpu", run_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="not a loss"):  # found at the first batch: forward may return the loss
        Trainer(max_duration="1ba", **dict(kwargs, train_dataloader=[torch.randn(4, 2)])).fit()
    with pytest.raises(ConfigError, match="invalid time"):
        Trainer(max_duration="ten batches", loss_fn=torch.nn.functional.mse_loss, **kwargs)
    with pytest.raises(ConfigError, match="checkpoint_layout"):
        Trainer(max_duration="1ba", loss_fn=torch.nn.functional.mse_loss, checkpoint_layout="zip", **kwargs)


@pytest.mark.subprocess
def test_second_signal_exits_at_once():
    code = ("import os, signal, time\n"
            "from foundry.trainer.signals import PauseRequest\n"
            "p = PauseRequest().install()\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "assert p.requested\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(5)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr
    assert "exiting now" in proc.stderr


def test_pause_request_first_signal_only_flags():
    p = PauseRequest().install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert p.requested and p.signum == signal.SIGTERM
    finally:
        p.uninstall()


def test_python_m_foundry_trainer_builds_from_parameters(tmp_path):
    from foundry.trainer.__main__ import build_from_parameters

    t = build_from_parameters({
        "model": "trainer.toy_job:ToyModel", "train_dataloader": "trainer.toy_job:ToyLoader",
        "train_dataloader_args": {"rank": 0, "world": 1}, "max_duration": "2ba", "run_name": "params",
        "run_dir": str(tmp_path), "device": "cpu", "optimizer": {"name": "SGD", "lr": 0.1}, "progress_bar": False})
    t.fit()
    assert t.timestamp.batch == 2 and type(t.optimizers[0]).__name__ == "SGD"
    with pytest.raises(ConfigError, match="module:callable"):
        build_from_parameters({"model": "nocolon", "train_dataloader": "x:y", "max_duration": "1ba"})


@pytest.mark.subprocess
def test_a_stop_before_the_trainer_exists_pauses_after_the_first_step(tmp_path):
    params = {"model": "trainer.toy_job:ToyModel", "train_dataloader": "trainer.toy_job:loader_after_a_stop",
              "train_dataloader_args": {"rank": 0, "world": 1}, "max_duration": "4ba", "run_name": "early",
              "run_dir": str(tmp_path), "device": "cpu", "save_folder": str(tmp_path / "ckpt"),
              "progress_bar": False}
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "FOUNDRY_PARAMETERS": json.dumps(params),
           "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "foundry.trainer"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 75, proc.stderr  # paused, resumable: not killed by the signal
    assert "paused at batch 1" in proc.stderr


def test_eval_bf16_clipping_deterministic_and_callbacks(tmp_path):
    from foundry.trainer import Callback

    from .toy_job import ToyLoader, ToyModel

    events = []

    class Spy(Callback):
        def fit_start(self, trainer):
            events.append("fit_start")

        def eval_end(self, trainer, metrics):
            events.append(("eval", trainer.timestamp.batch, round(metrics["eval/loss"], 6)))

        def fit_end(self, trainer):
            events.append("fit_end")

    eval_data = [{"x": torch.randn(4, 8), "y": torch.randn(4, 1)} for _ in range(2)]
    try:
        t = Trainer(run_name="parts", model=ToyModel(), train_dataloader=ToyLoader(0, 1), max_duration="4ba",
                    eval_dataloader=eval_data, eval_interval="2ba", precision="bf16", grad_clip_norm=0.5,
                    deterministic_mode=True, callbacks=[Spy()], device="cpu", run_dir=str(tmp_path),
                    progress_bar=False).fit()
    finally:
        torch.use_deterministic_algorithms(False)
    assert events[0] == "fit_start" and events[-1] == "fit_end"
    assert [e[1] for e in events if isinstance(e, tuple)] == [2, 4]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if "loss" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4]
    assert {"lr", "throughput", "samples_per_sec", "tokens_per_sec", "wall_time", "epoch"} <= set(train_rows[0])
    assert [r["step"] for r in rows if "eval/loss" in r] == [2, 4]
    assert json.loads((tmp_path / "config.json").read_text())["trainer"]["precision"] == "bf16"
    assert t.timestamp.sample == 32
