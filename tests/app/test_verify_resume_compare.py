"""verify-resume's pure parts: where it stops a run, and how it names the first difference between a
resumed run and the straight one from the rows both wrote (metrics.jsonl + the probe's digests)."""

from __future__ import annotations

import pytest

from foundry.app.control.verify import make_plan, parse_world_sizes
from foundry.app.control.verify.compare import RunRecord, compare
from foundry.plugins.errors import ConfigError

PARTS = {"model": "m", "optimizer:state": "o", "optimizer:hyperparameters": "h", "schedulers": "s", "scaler": "c",
         "data": "d", "rng:torch": "t", "rng:python": "p", "generator:__main__.G": "g"}


def _record(steps, segments=((0, 1),), change=None, loss_change=None, final=None) -> RunRecord:
    """Rows of a run: each segment (resumption, first step) trains to `steps`; `change` maps
    (resumption, step) to parts whose digest differs; `loss_change` to steps whose loss differs."""
    change, loss_change = change or {}, loss_change or set()
    metrics, probe = [], []
    for index, (resumption, first) in enumerate(segments):
        last = segments[index + 1][1] if index + 1 < len(segments) else steps + 1
        probe.append({"kind": "start", "resumption": resumption, "resumed_from": f"ep0-ba{first - 1}" if resumption else None})
        for step in range(first, last):
            parts = dict(PARTS)
            for name in change.get((resumption, step), ()):
                parts[name] = "other"
            probe.append({"kind": "state", "step": step, "resumption": resumption, "parts": parts})
            loss = 1.0 / step + (1e-7 if (resumption, step) in loss_change else 0.0)
            metrics.append({"step": step, "loss": loss, "resumption": resumption})
    probe.append({"kind": "final", "resumption": segments[-1][0], "parameters": final or {"w": "x", "b": "y"}})
    return RunRecord(metrics=metrics, probe={0: probe})


STRAIGHT = _record(8)


def test_identical_rows_are_ok():
    c = compare(1, STRAIGHT, _record(8, segments=((0, 1), (1, 4), (2, 6))))
    assert c.ok and c.first is None and c.final_equal is True and c.losses_compared == 8


def test_a_generator_the_checkpoint_cannot_hold_is_named_at_the_first_resumed_step():
    stopped = _record(8, segments=((0, 1), (1, 4)), change={(1, s): ["generator:__main__.G"] for s in range(4, 9)},
                      loss_change={(1, s) for s in range(4, 9)}, final={"w": "x2", "b": "y"})
    c = compare(1, STRAIGHT, stopped)
    assert not c.ok
    assert (c.first.step, c.first.resumption, c.first.first_loss_step) == (4, 1, 4)
    assert c.first.parts == ["generator:__main__.G"]
    assert c.first.resumed_from == "ep0-ba3"
    assert "not one the checkpoint holds" in c.first.hint
    assert c.final_differing == ["w"]


def test_state_that_differs_before_the_loss_does_is_the_first_difference():
    # an optimizer not restored: the loss of the first resumed step is still right (computed before the update)
    stopped = _record(8, segments=((0, 1), (1, 4)), change={(1, s): ["optimizer:state", "model"] for s in range(4, 9)},
                      loss_change={(1, s) for s in range(5, 9)})
    c = compare(1, STRAIGHT, stopped)
    assert (c.first.step, c.first.first_loss_step) == (4, 5)
    assert c.first.parts == ["model", "optimizer:state"]  # the most telling first


def test_a_data_position_not_carried_back_is_named_before_the_rng_it_also_moved():
    stopped = _record(8, segments=((0, 1), (1, 4)), change={(1, 4): ["rng:torch", "data"]}, loss_change={(1, 4)})
    assert compare(1, STRAIGHT, stopped).first.parts == ["data", "rng:torch"]


def test_a_loss_that_differs_with_every_digest_equal_is_unseen_randomness():
    stopped = _record(8, segments=((0, 1), (1, 4)), loss_change={(1, 6)})
    c = compare(1, STRAIGHT, stopped)
    assert c.first.parts == ["unseen"] and c.first.step == 6 and "nondeterministic" in c.first.hint


def test_a_difference_before_any_stop_is_named_as_two_fresh_runs_not_the_resume():
    # seen under 3 xdist workers: the parameters after step 1 differed while the optimizer state (moments of the
    # same gradients) was equal, before the first stop: AdamW's update, whose sqrt (MKL on CPU) is not exact
    stopped = _record(8, segments=((0, 1), (1, 4)), change={(r, s): ["model"] for r, s in ((0, 2), (0, 3), (1, 4))},
                      final={"w": "x2", "b": "y2"})
    c = compare(1, STRAIGHT, stopped)
    assert (c.first.step, c.first.resumption, c.first.resumed_from, c.first.parts) == (2, 0, None, ["model"])
    assert "before any stop" in c.first.hint and "not restored" not in c.first.hint


def test_steps_the_resumed_run_never_logged_fail_the_check():
    stopped = _record(8, segments=((0, 1), (1, 4)))
    stopped.metrics = [m for m in stopped.metrics if m["step"] != 5]
    c = compare(1, STRAIGHT, stopped)
    assert not c.ok and c.missing_steps == [5]


def test_final_parameters_that_differ_fail_even_when_every_loss_matched():
    c = compare(1, STRAIGHT, _record(8, segments=((0, 1), (1, 4)), final={"w": "x", "b": "changed"}))
    assert not c.ok and c.final_differing == ["b"] and c.first.parts == ["final"]


def test_plan_alternates_graceful_and_kill_stops_at_checkpoint_batches():
    plan = make_plan(12, 2, (2, 1))
    assert [(s.kind, s.at) for s in plan.stops] == [("term", 4), ("kill", 8)]
    assert plan.save_every == 4 and plan.world_sizes == (2, 1)


@pytest.mark.parametrize("steps,stops", [(3, 2), (10, 0)])
def test_plan_refuses_too_few_steps_or_no_stop(steps, stops):
    with pytest.raises(ConfigError):
        make_plan(steps, stops, (1,))


def test_world_sizes_are_parsed_and_bad_ones_refused():
    assert parse_world_sizes("2, 1,2") == (2, 1)
    with pytest.raises(ConfigError, match="--world-sizes"):
        parse_world_sizes("2,zero")


def test_one_process_runs_the_command_itself_and_more_run_it_under_torchrun(tmp_path):
    from foundry.app.control.verify.runner import Target

    assert Target(("python", "train.py", "--x"), tmp_path).argv(1, tmp_path) == ["python", "train.py", "--x"]
    under = Target(("python", "-m", "pkg.train"), tmp_path).argv(2, tmp_path)
    assert under[:3] == ["python", "-m", "torch.distributed.run"] and "--nproc-per-node=2" in under
    assert under[-2:] == ["-m", "pkg.train"]  # torchrun's own -m: the module, as the user gave it
    assert "--no-python" in Target(("bash", "-c", "python t.py"), tmp_path).argv(2, tmp_path)
