"""The tiny GPT as a run's command (examples/main_job.py registers it on the local cluster).

Configuration from the run spec's environment: DATA_URL (the MDS dataset from prep.py), SAVE_URL
(checkpoints; {run_name} is replaced), MAX_DURATION (the LR schedule's length), MINUTES (a wall-clock
budget: training stops with a final checkpoint when it is spent). The control plane sets RUN_NAME
and FOUNDRY_RUN_DIR, where the trainer writes metrics.jsonl for `foundry describe run` and the TUI.
A new run resumes from checkpoints already under its name (the trainer says so in one line).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.gpt.train import build_trainer  # noqa: E402


class TimeBudget:
    """Stops training (with its final checkpoint) once `seconds` of training have passed, and tells
    the loggers that show an ETA, so the log never promises more time than the budget leaves."""

    def __init__(self, seconds: float):
        self.seconds, self.start, self.spent = seconds, 0.0, False

    def fit_start(self, trainer) -> None:
        self.start, self.spent = time.monotonic(), False
        for logger in trainer.loggers:
            if hasattr(logger, "set_time_budget"):  # the console's progress lines (trainer/loggers.py)
                logger.set_time_budget(self.seconds)
        # for `foundry get runs`, `describe run` and the TUI: an ETA within the budget (run_views.py)
        self._record(trainer, {"event": "time_budget", "seconds": self.seconds})

    def batch_end(self, trainer) -> None:
        if time.monotonic() - self.start >= self.seconds:
            if not self.spent:
                # ...and once it is spent, "stopped at its time budget" rather than "264/2000"
                self._record(trainer, {"event": "stopped", "reason": "time_budget", "seconds": self.seconds})
            self.spent = True
            trainer.stop()

    @staticmethod
    def _record(trainer, event: dict) -> None:
        from foundry.trainer.loggers import JSONLinesLogger

        sinks = [lg for lg in trainer.loggers if isinstance(lg, JSONLinesLogger)]  # metrics.jsonl; rank 0 has the loggers
        if not sinks:
            return
        event["resumption"] = trainer.env.resumption_index
        for logger in sinks:
            logger.log_metrics(event, trainer.timestamp.batch)


def main() -> None:
    env = os.environ
    trainer = build_trainer(env["DATA_URL"], env["SAVE_URL"], run_name=env.get("RUN_NAME", "main-job"),
                            max_duration=env.get("MAX_DURATION", "2000ba"), save_interval="200ba",
                            eval_interval="200ba", autoresume=True, save_overwrite=False,
                            cache_dir=os.path.join(env.get("FOUNDRY_RUN_DIR", "."), "data-cache"),
                            device="auto", callbacks=[TimeBudget(float(env.get("MINUTES", "2")) * 60)])
    params = trainer.resolved_config["model"]["parameters"]
    print(f"training a {params / 1e6:.1f}M-parameter GPT on {trainer.device} for {env.get('MINUTES', '2')} min "
          f"(at most {trainer.cfg.max_duration}); checkpoints -> {trainer.cfg.save_url}", flush=True)
    trainer.fit()


if __name__ == "__main__":
    main()
