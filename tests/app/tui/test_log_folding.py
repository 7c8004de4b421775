"""A paused job's log ends in torchrun's exit report for exit code 75: the TUI folds it into one
"paused" line; a real failure's report (any other exit code) is shown whole."""

from __future__ import annotations

from foundry.app.tui.log_folding import PAUSED_LINE, fold_paused_exit

# torchrun 2.13's report, as a Slurm job's log holds it when every rank exited 75 after a checkpoint
REPORT = """\
E1123 19:19:50.320000 6674 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: {code}) local_rank: 0 (pid: 7252) of binary: /venv/bin/python
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1028, in main
    run(args)
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
foundry.backends.compute.local_rank FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_19:19:50
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : {code} (pid: 7252)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================"""


def lines(code: int) -> list[str]:
    return ["[rank 0] step 40/200: loss=1.2", "[rank 0] foundry: paused at batch 42; exit 75",
            *REPORT.format(code=code).splitlines(), "slurm job done"]


def test_a_paused_exit_report_is_one_line():
    folded = fold_paused_exit(lines(75))
    assert folded == ["[rank 0] step 40/200: loss=1.2", "[rank 0] foundry: paused at batch 42; exit 75",
                      PAUSED_LINE, "slurm job done"]


def test_a_failure_report_stays_whole_and_a_cut_report_is_not_folded():
    assert fold_paused_exit(lines(1)) == lines(1)
    cut = lines(75)[:-3]  # read while the job is still writing it
    assert fold_paused_exit(cut) == cut
