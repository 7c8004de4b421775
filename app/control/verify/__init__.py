"""`foundry verify-resume`: does the user's own training resume exactly? (docs/resume.md)

plan.py (where to stop; pure) -> runner.py (run the command straight and through its stops; read the
rows back) -> compare.py (the first difference and the state part behind it; pure) -> report.py (lines
for a person). check.py ties them together. Nothing here imports torch: the training runs in its own
processes, and the probe inside them (trainer/resume_probe.py) writes what is compared.
"""

from .plan import Plan, Stop, make_plan, parse_world_sizes
from .report import render
from .runner import Target, TrainingFailed
from .check import Outcome, run_check, target_from_command, target_from_spec, verify_resume

__all__ = ["Outcome", "Plan", "Stop", "Target", "TrainingFailed", "make_plan", "parse_world_sizes", "render", "run_check",
           "target_from_command", "target_from_spec", "verify_resume"]
