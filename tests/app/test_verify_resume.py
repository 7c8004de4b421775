"""`foundry verify-resume` on real training processes: the example GPT with dropout resumes exactly
through a SIGTERM pause and a kill -9; a model that draws from a generator no checkpoint holds is
caught, with the first differing step and that generator named."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).resolve().parent / "verify_resume_job.py"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_example_gpt_with_dropout_resumes_exactly(cli, tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        from examples.gpt.prep import prepare
    finally:
        sys.path.remove(str(ROOT))
    data = f"file://{tmp_path}/data"
    prepare(data, max_mb=0.05)
    code, out, err = cli("verify-resume", "--json", "--steps", "8", "--stops", "2", "--work-dir", str(tmp_path / "w"),
                         "--", sys.executable, str(ROOT / "examples/gpt/train.py"), "--data", data,
                         "--dropout", "0.1", "--device", "cpu")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["ok"] and [s["kind"] for s in report["stops"]] == ["term", "kill"]
    (result,) = report["results"]
    assert result["final_equal"] and result["first"] is None and result["missing_steps"] == []
    assert result["losses_compared"] >= 8  # every step, the ones a killed process trained included


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_module_level_torch_generator_is_caught_and_named(cli, tmp_path):
    code, out, err = cli("verify-resume", "--steps", "6", "--stops", "1", "--work-dir", str(tmp_path / "w"),
                         "--", sys.executable, str(JOB), "--noise", "torch-generator")
    assert code == 1, out + err
    # the pause lands after batch 4 (the SIGTERM after batch 3, then the step in progress): step 5 is the first
    # one trained by the resumed process, and the first whose loss differs
    assert "first difference: step 5 (resumption 1, resumed from ep0-ba4)" in out, out
    assert "loss first differs at step 5" in out, out
    assert "not carried back: random generator __main__.NOISE_GEN" in out, out
    assert "hint: this random generator is not one the checkpoint holds" in out, out
    assert "FAILED: resume is NOT exact" in out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_module_level_python_random_is_caught_in_json(cli, tmp_path):
    code, out, err = cli("verify-resume", "--json", "--steps", "6", "--stops", "1", "--work-dir", str(tmp_path / "w"),
                         "--", sys.executable, str(JOB), "--noise", "python-random")
    assert code == 1, out + err
    (result,) = json.loads(out)["results"]
    first = result["first"]
    assert (first["step"], first["resumption"], first["first_loss_step"]) == (5, 1, 5)
    assert first["parts"] == ["generator:__main__.NOISE_RANDOM"]
    assert result["final_equal"] is False


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_learning_rate_set_outside_the_checkpoint_is_named_before_any_loss_differs(cli, tmp_path):
    code, out, err = cli("verify-resume", "--json", "--steps", "6", "--stops", "1", "--work-dir", str(tmp_path / "w"),
                         "--", sys.executable, str(JOB), "--decay-by-hand")
    assert code == 1, out + err
    (result,) = json.loads(out)["results"]
    first = result["first"]
    # resumed from batch 4 with the right lr; the callback's counter starts again at 0 and sets a wrong lr
    # after step 5, so the optimizer differs before step 6, whose loss (computed before that update) still matches
    assert (first["step"], first["resumption"], first["resumed_from"]) == (6, 1, "ep0-ba4")
    assert first["parts"] == ["optimizer:hyperparameters"] and first["first_loss_step"] is None
    assert "Trainer(schedulers=...)" in first["hint"] and result["final_equal"] is False


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_spec_on_two_processes_resumes_exactly_and_leaves_no_process_behind(cli, tmp_path):
    spec = tmp_path / "run.yaml"
    spec.write_text(f"name: noisy\ncommand: [{sys.executable!r}, {str(JOB)!r}, --noise, global]\n"
                    "compute: {cluster: local, gpus: 2}\nenv_variables: {OMP_NUM_THREADS: '1'}\n")
    code, out, err = cli("verify-resume", "--json", "-f", str(spec), "--steps", "6", "--work-dir", str(tmp_path / "w"))
    assert code == 0, out + err
    report = json.loads(out)
    assert report["ok"] and report["world_sizes"] == [2]  # the spec's gpus, under torchrun
    starts = [json.loads(line) for path in (tmp_path / "w").glob("*/probe/rank*.jsonl")
              for line in path.read_text().splitlines() if '"start"' in line]
    assert len(starts) == 8  # 2 ranks x (1 straight + 3 stopped processes)
    for row in starts:  # the ranks torchrun started in sessions of their own, the killed ones included
        with pytest.raises(ProcessLookupError):
            os.kill(row["pid"], 0)


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    code, _, err = cli("verify-resume", "--steps", "3", "--", sys.executable, str(JOB))
    assert code == 2 and "--steps 3 is too few for 2 stops" in err
    code, _, err = cli("verify-resume")
    assert code == 2 and "nothing to verify" in err
    code, _, err = cli("verify-resume", "--work-dir", str(tmp_path / "w"), "--", "no-such-python", "train.py")
    assert code == 2 and "cannot start 'no-such-python'" in err
