"""What `foundry verify-resume` prints for a person (--json prints Outcome.to_dict() instead)."""

from __future__ import annotations

from .compare import Comparison, part_family

_PART_WORDS = {
    "model": "the model's parameters", "schedulers": "the schedulers' state",
    "scaler": "the grad scaler", "data": "the data position (the batch differs)", "unseen": "nothing the checkpoint holds",
    "final": "the final parameters",
}


def describe_part(name: str) -> str:
    family, _, detail = name.partition(":")
    if family == "rng":
        return f"the global RNG stream ({detail})"
    if family == "optimizer":
        return "the optimizer's hyperparameters (learning rate, ...)" if detail == "hyperparameters" \
            else "the optimizer state (moments, step counts)"
    if family == "generator":
        return f"random generator {detail} (not in the checkpoint)"
    return _PART_WORDS.get(family, name)


def render(outcome) -> list[str]:
    plan = outcome.plan
    lines = [f"verify-resume: {outcome.command}",
             f"  {plan.steps} batches, checkpoint every {plan.save_every}; stops: "
             + "; ".join(s.describe() for s in plan.stops)]
    for c in outcome.comparisons:
        lines += _world(c)
    verdict = "resume is exact" if outcome.ok else "resume is NOT exact"
    lines.append(f"{'OK' if outcome.ok else 'FAILED'}: {verdict} ({outcome.wall_seconds:.0f} s)")
    if outcome.work_dir:
        lines.append(f"  runs kept in {outcome.work_dir}")
    return lines


def _world(c: Comparison) -> list[str]:
    head = f"world size {c.world_size}:"
    if c.ok:
        return [f"{head} identical: {c.losses_compared} losses bit for bit, state before {c.states_compared} steps, "
                f"final parameters equal"]
    lines = [f"{head} DIFFERS"]
    d = c.first
    if d is not None and d.step >= 0:
        where = f"resumption {d.resumption}" + (f", resumed from {d.resumed_from}" if d.resumed_from else "")
        lines.append(f"  first difference: step {d.step} ({where})")
        if d.first_loss_step is not None:
            lines.append(f"  loss first differs at step {d.first_loss_step}: {d.loss!r} resumed vs "
                         f"{d.straight_loss!r} straight")
        if d.parts == ["unseen"]:
            lines.append("  not carried back: nothing the probe sees (all state digests matched before the step)")
        else:
            lines.append("  not carried back: " + "; ".join(describe_part(p) for p in d.parts))
        lines.append(f"  hint: {d.hint}")
    elif d is not None:
        lines.append(f"  hint: {d.hint}")
    if c.final_equal is False:
        names = c.final_differing
        lines.append(f"  final parameters differ: {len(names)} tensors ({', '.join(names[:4])}"
                     f"{', ...' if len(names) > 4 else ''})")
    elif c.final_equal is None:
        lines.append("  final parameters: not compared (a run did not finish)")
    if c.missing_steps:
        lines.append(f"  steps the resumed run never logged: {c.missing_steps[:10]}")
    return lines


__all__ = ["render", "describe_part", "part_family"]
