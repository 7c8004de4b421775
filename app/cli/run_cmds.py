"""Run verbs: run, get runs, describe run, logs, stop, resume, delete run, watch. Work is in ControlPlane."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer
import yaml

from foundry.plugins.errors import FoundryError

from .groups import group
from .output import json_option, sink


def _cp():
    from foundry.app.control import ControlPlane

    return ControlPlane()


def _when(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else None


def _duration(start: float | None, end: float | None) -> str | None:
    if not start:
        return None
    secs = int((end or time.time()) - start)
    return f"{secs // 3600}h{secs % 3600 // 60:02d}m{secs % 60:02d}s" if secs >= 3600 else f"{secs // 60}m{secs % 60:02d}s"


def _json(flag: bool) -> None:
    sink.json_mode = sink.json_mode or flag


def run(
    file: Path = typer.Option(..., "-f", "--file", help="The run spec (YAML)."),
    name: Optional[str] = typer.Option(None, "--name", help="Override the run name."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Override compute.cluster."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Override compute.gpus (total devices)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Override compute.nodes."),
    follow: bool = typer.Option(False, "--follow", help="Stream the logs until the run ends."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the normalized spec and the plan; launch nothing."),
    json_out: bool = json_option(),
) -> None:
    """Launch a run from a run spec."""
    _json(json_out)
    cp = _cp()
    overrides = dict(name=name, cluster=cluster, gpus=gpus, nodes=nodes)
    if name is not None:  # --name also names a spec that has no `name:` of its own
        from foundry.app.runspec import load_spec

        file = load_spec(file, name=name)
    if dry_run:
        plan = cp.dry_run(file, **overrides)
        if sink.json_mode:
            sink.emit(plan.to_dict())
            return
        sink.lines(["# normalized spec", yaml.safe_dump(plan.spec, sort_keys=False).rstrip(),
                    f"# plan ({plan.provider} on cluster {plan.cluster})", plan.summary, "# environment"])
        sink.lines(f"{k}={v}" for k, v in sorted(plan.env.items()) if "\n" not in v)
        if plan.secret_files:
            sink.lines(["# secret files"] + plan.secret_files)
        for key, text in plan.artifacts.items():
            sink.lines([f"# {key}", text])
        return
    info = cp.create_run(file, **overrides)
    if not follow:
        sink.emit(_run_row(info)) if sink.json_mode else sink.info(
            f"run {info.name} launched on {info.cluster} ({info.devices} device(s)); "
            f"`foundry logs {info.name} --follow` to watch")
        if not sink.json_mode:
            sink.lines([info.name])
        return
    _follow_and_exit(cp, info.name, f"run {info.name} launched on {info.cluster}; following logs "
                                    "(Ctrl-C detaches, the run goes on)")


def _watch(name: str, lines, intro: str | None = None) -> None:
    """Print `intro`, then `lines` as they come; Ctrl-C stops watching, never the run (the same in
    `run --follow`, `resume --follow` and `logs --follow`): one line says so and how to pause it, exit 130."""
    try:
        # `intro` ("following logs") is printed inside the try: a Ctrl-C right after it appears would
        # otherwise land before the try, where typer turns the KeyboardInterrupt into a silent exit 130
        if intro:
            sink.info(intro)
        sink.lines(lines)
    except KeyboardInterrupt:
        sink.info(f"stopped watching run {name}; it goes on (`foundry logs {name} --follow` watches again, "
                  f"`foundry stop {name}` pauses it)")
        raise typer.Exit(130) from None


def _follow_and_exit(cp, name: str, intro: str) -> None:
    """`intro`, then the logs across retries; a run that ends failed or lost exits 1 with its reason."""
    _watch(name, cp.follow_run(name), intro)
    final = cp.get_run(name)
    reason = final.latest.exit_reason if final.latest and final.latest.exit_reason else None
    if final.status in ("failed", "lost"):
        raise FoundryError(f"run {name} {final.status}" + (f": {reason}" if reason else ""),
                           hint=f"`foundry describe run {name}`; `foundry logs {name}`")
    sink.info(f"run {name} {final.status}" + (f": {reason}" if reason else ""))


_BARS = "▁▂▃▄▅▆▇█"


def loss_curve(rows: list[dict], width: int = 48) -> str | None:
    """One line: the training loss as a sparkline (bucket means), first and last values, steps."""
    points = [(r["step"], r["loss"]) for r in rows if isinstance(r.get("loss"), (int, float)) and "step" in r]
    if len(points) < 2:
        return None
    losses = [loss for _, loss in points]
    size = max(1, -(-len(losses) // width))
    means = [sum(chunk) / len(chunk) for chunk in (losses[i:i + size] for i in range(0, len(losses), size))]
    low, high = min(means), max(means)
    span = (high - low) or 1.0
    bars = "".join(_BARS[min(len(_BARS) - 1, int((m - low) / span * len(_BARS)))] for m in means)
    return f"loss  {losses[0]:.3f} {bars} {losses[-1]:.3f}  (steps {points[0][0]}..{points[-1][0]})"


def _run_row(run, cost: dict | None = None) -> dict:
    return {"name": run.name, "status": run.status, "cluster": run.cluster, "devices": run.devices,
            "cost": f"${cost['total_usd']:.2f}" if cost else "",
            "nodes": run.nodes, "resumptions": len(run.resumptions), "retries": run.retries_used,
            "created": datetime.fromtimestamp(run.created_at).strftime("%m-%d %H:%M"),
            "why": (run.latest.exit_reason or "") if run.latest and run.status in ("failed", "lost") else ""}


def get_runs(json_out: bool = json_option()) -> None:
    """List runs (newest first); also runs the watchdog step."""
    _json(json_out)
    cp = _cp()
    runs = cp.list_runs()
    if sink.json_mode:
        sink.emit([dict(r.to_dict(), cost=cp.run_cost(r)) for r in runs])
    else:
        sink.emit([_run_row(r, cp.run_cost(r)) for r in runs],
                  columns=["name", "status", "cluster", "devices", "resumptions", "cost", "created", "why"])


def _progress_line(p, active: bool = False) -> str:
    parts = [f"step {p.step}" + (f"/{p.max_steps}" if p.max_steps else "")]
    if p.stop_reason == "time_budget" and not active:   # done at its budget, not 13% of the way
        budget = f" ({p.budget_s / 60:g} min)" if p.budget_s else ""
        parts = [f"step {p.step}, stopped at its time budget{budget}"
                 + (f" before the schedule's {p.max_steps}" if p.max_steps else "")]
    elif p.eta_s is not None:
        secs = int(p.eta_s)
        parts.append(f"ETA {secs // 3600}h{secs % 3600 // 60:02d}m" if secs >= 3600 else f"ETA {secs // 60}m{secs % 60:02d}s")
    if p.loss is not None:
        parts.append(f"loss {p.loss:.4g}")
    if p.tokens_per_sec:
        parts.append(f"{p.tokens_per_sec:,.0f} tokens/s")
    if p.mfu is not None:
        parts.append(f"MFU {p.mfu:.1%}")
    return "progress: " + ", ".join(parts)


def describe_run(name: str = typer.Argument(..., help="Run name."), json_out: bool = json_option()) -> None:
    """A run's spec, resumptions (one row each) and events."""
    _json(json_out)
    cp = _cp()
    run = cp.get_run(name)
    from dataclasses import asdict

    progress = cp.run_progress(run)
    usage = cp.egress(name)
    records = cp.metrics(name)
    ledger = cp.run_ledger(run, records)
    if sink.json_mode:
        data = dict(run.to_dict(), progress=asdict(progress), recovery=asdict(ledger))
        for res in data["resumptions"]:   # bytes per node under each resumption, summed for the run below
            res["egress"] = usage["resumptions"].get(str(res["index"]), {})
        data["egress"] = {k: usage[k] for k in ("nodes", "total", "cost")}
        cost = cp.run_cost(run)
        for res in data["resumptions"]:
            res["cost"] = cost["resumptions"].get(str(res["index"]))
        data["cost"] = {k: cost[k] for k in ("compute_usd", "transfer_usd", "requests_usd", "total_usd")}
        sink.emit(data)
        return
    sink.emit({"name": run.name, "id": run.id, "status": run.status, "cluster": run.cluster,
               "devices": run.devices, "nodes": run.nodes, "created": _when(run.created_at),
               "retries": f"{run.retries_used}/{run.max_retries}",
               "command": run.spec.get("command", "(trainer parameters)")})
    if progress.step is not None:
        from foundry.app.control import ACTIVE_STATUSES

        sink.lines([_progress_line(progress, run.status in ACTIVE_STATUSES)])
    sink.out.print()
    cost = cp.run_cost(run)
    sink.emit([{"#": r.index, "cluster": r.cluster, "devices": r.devices, "state": r.state,
                "cause": r.cause, "started": _when(r.started_at), "took": _duration(r.started_at, r.ended_at),
                "cost": f"${cost['resumptions'][str(r.index)]['usd']:.4f}",
                "exit": r.exit_code, "reason": r.exit_reason} for r in run.resumptions], title="Resumptions")
    from foundry.app.control import request_line, run_cost_line

    sink.lines([run_cost_line(cost)] + [request_line(idx, c["requests"]) for idx, c in cost["resumptions"].items()
                                    if c["requests"]["stores"]])
    resumed = [f"resumption {r.index} resumed from {r.resumed_from}" for r in run.resumptions if r.resumed_from]
    if resumed:
        sink.lines(resumed)
    _recovery(ledger)
    curve = loss_curve(records)
    if curve:
        sink.out.print()
        sink.lines([curve])
    if usage["nodes"]:
        from foundry.app.control import egress_cost_line, egress_rows

        sink.out.print()
        sink.emit(egress_rows(usage), title="Transfers per node (storage layer, exact bytes)")
        sink.lines([egress_cost_line(usage)])
    sink.out.print()
    sink.emit([{"time": _when(e.time), "event": e.event, "resumption": e.resumption,
                "details": {k: v for k, v in e.details.items() if k != "resumption"} or None}
               for e in run.events], title="Events")


def _secs(value: float | None) -> str | None:
    return None if value is None else f"{value:.0f}s" if value >= 10 else f"{value:.1f}s"


def _recovery(ledger) -> None:
    """The recovery ledger: only once a run has more than one resumption or lost one."""
    if len(ledger.entries) > 1 or any(e.ended == "lost" for e in ledger.entries):
        sink.out.print()
        sink.emit([{"#": e.resumption, "ended": e.ended or "running", "why": e.why,
                    "steps": f"{e.steps[0]}-{e.steps[1]}" if e.steps else None,
                    "detected after": _secs(e.detect_s), "next first step after": _secs(e.restart_s),
                    "steps redone": e.steps_redone, "time lost": _secs(e.lost_s)} for e in ledger.entries],
                  title="Recovery")
    if ledger.goodput is not None:
        sink.lines([f"goodput: {ledger.goodput:.0%} ({_secs(ledger.useful_s)} on steps that counted of "
                    f"{_secs(ledger.wall_s)} since the first launch)"])


def logs(
    name: str = typer.Argument(..., help="Run name."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep streaming until the run ends."),
    resumption: Optional[int] = typer.Option(None, "--resumption", help="Which resumption (default: latest)."),
    rank: Optional[int] = typer.Option(None, "--rank", help="One process's log (default: the whole job)."),
) -> None:
    """Print a run's logs."""
    cp = _cp()
    if follow and resumption is None:
        _watch(name, cp.follow_run(name, rank=rank))
    else:
        _watch(name, cp.logs(name, resumption=resumption, rank=rank, follow=follow))


def stop(
    name: str = typer.Argument(..., help="Run name."),
    force: bool = typer.Option(False, "--force", help="Kill at once instead of pausing at a checkpoint."),
    wait: bool = typer.Option(False, "--wait", help="Wait until the run has stopped."),
    json_out: bool = json_option(),
) -> None:
    """Pause a run: the trainer checkpoints and exits as paused (resume it anywhere later)."""
    _json(json_out)
    cp = _cp()
    info = cp.stop_run(name, graceful=not force)
    if wait:
        info = cp.wait(name)
    if sink.json_mode:
        sink.emit(_run_row(info))
    else:
        sink.info(f"run {name} {info.status}")


def resume(
    name: str = typer.Argument(..., help="Run name."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Resume on this cluster (default: the last one)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Total devices (keep the global batch)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Nodes."),
    follow: bool = typer.Option(False, "--follow", help="Stream the logs until the run ends."),
    json_out: bool = json_option(),
) -> None:
    """Start a new resumption of a paused/stopped/failed/lost run, on any cluster."""
    _json(json_out)
    cp = _cp()
    info = cp.resume_run(name, cluster=cluster, gpus=gpus, nodes=nodes)
    if follow:
        _follow_and_exit(cp, name, f"run {name} resumed on {info.cluster} (resumption {info.latest.index}); "
                                   "following logs")
    elif sink.json_mode:
        sink.emit(_run_row(info))
    else:
        sink.info(f"run {name} resumed on {info.cluster} as resumption {info.latest.index} ({info.devices} device(s))")


def delete_run(name: str = typer.Argument(..., help="Run name."),
               yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
               checkpoints: Optional[bool] = typer.Option(
                   None, "--delete-checkpoints/--keep-checkpoints",
                   help="Also delete the run's checkpoints (asked at a terminal; kept otherwise). "
                        "Kept checkpoints are resumed by a new run of the same name.")) -> None:
    """Delete a run: stop it if active, forget it, remove its logs; its checkpoints only if asked."""
    cp = _cp()
    url = cp.checkpoint_url(name)
    status = cp.get_run(name).status
    from foundry.app.control import ACTIVE_STATUSES

    active = status in ACTIVE_STATUSES
    if not yes and sink.interactive:
        typer.confirm(f"run {name} is {status}: delete kills it now, without a last checkpoint "
                      f"(`foundry stop {name} --wait` pauses it at one). delete it?" if active
                      else f"delete run {name}?", abort=True)
    if checkpoints is None and url and sink.interactive and not yes:
        checkpoints = typer.confirm(f"also delete its checkpoints at {url}?", default=False)
    cp.delete_run(name, checkpoints="delete" if checkpoints else "keep")
    if url and checkpoints:
        sink.info(f"deleted run {name} and its checkpoints at {url}")
    elif url:
        sink.info(f"deleted run {name}; kept its checkpoints at {url} (a new run named {name} resumes from "
                  f"them; `foundry rm -r {url}` or --delete-checkpoints removes them)")
    else:
        sink.info(f"deleted run {name}")
    if active:
        sink.info(f"  it was {status}: killed without a last checkpoint (`foundry stop {name} --wait` "
                  "before deleting keeps its progress)")


def watch(interval: float = typer.Option(10.0, help="Seconds between watchdog passes."),
          once: bool = typer.Option(False, "--once", help="One pass, then exit."),
          daemon: bool = typer.Option(False, "--daemon", help="Run in the background (one per host; output "
                                      "in FOUNDRY_HOME/watchdogs/daemon.log)."),
          stop_daemon: bool = typer.Option(False, "--stop", help="Stop this host's watchdog daemon."),
          status: bool = typer.Option(False, "--status", help="Say which watchdogs run, then exit."),
          daemon_child: bool = typer.Option(False, "--daemon-child", hidden=True)) -> None:
    """The watchdog loop: refresh run states and relaunch runs lost to system failures."""
    if interval <= 0:
        raise typer.BadParameter("must be a number of seconds above 0", param_hint="--interval")
    cp = _cp()
    if status:
        running = cp.watchdogs()
        for w in running:
            sink.info(f"watchdog pid {w.pid} on {w.host}{' (daemon)' if w.daemon else ''}, every {w.interval:g}s, "
                      f"last pass {_when(w.last_pass) or 'not yet'}")
        if not running:
            sink.info("no watchdog runs: lost runs are relaunched only when a command reads them "
                      "(`foundry watch --daemon` starts one)")
        return
    if stop_daemon:
        pids = cp.stop_watchdog_daemons()
        sink.info(f"stopped watchdog daemon pid {', '.join(map(str, pids))}" if pids else "no watchdog daemon runs here")
        return
    if daemon:
        started = cp.start_watchdog_daemon(interval)
        sink.info(f"watchdog daemon started: pid {started.pid}, every {interval:g}s "
                  f"(`foundry watch --stop` stops it)")
        return
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so the record below is removed on a stop
    with cp.watching(interval, daemon=daemon_child) as passed:  # --daemon-child: started by --daemon
        while True:
            for line in cp.reconcile():
                sink.info(line)
            passed()
            if once:
                return
            time.sleep(interval)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("logs")(logs)
    app.command("stop")(stop)
    app.command("resume")(resume)
    app.command("watch")(watch)
    group(app, "get").command("runs")(get_runs)
    group(app, "describe").command("run")(describe_run)
    group(app, "delete").command("run")(delete_run)
