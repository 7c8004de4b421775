"""Pure rendering of the files a Slurm job runs: the sbatch script, the per-rank wrapper, the
pause helper and the environment file. No I/O here: `dryrun` shows these, `launch` writes them.

How a job runs: sbatch starts `job.sbatch` on the first node; it sources `env.sh` (0600: the
job's environment, secrets included), then `srun` starts one `torchrun` per node, which rendezvous
(c10d) at the first node of `$SLURM_JOB_NODELIST`. torchrun starts `rank.sh CMD...` per local rank;
the wrapper records the worker's pid and exit code under `ranks/`, and tees its output into
`logs/rank-N.log`. A pause (`scancel --batch --signal=TERM`, or `--signal=B:TERM@T` before the time
limit) reaches the batch shell only; its trap runs `pause.sh` on every node, which sends SIGTERM
exactly once to each worker (never to torchrun, which would forward a second one). The script
writes the job's exit code to `exit_code`: 75 (paused) when the ranks exited 75 after a pause,
even though torchrun itself reports a child failure.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

from foundry.plugins import heartbeat
from foundry.plugins.compute import PAUSED_EXIT_CODE, JobRequest
from foundry.plugins.errors import ConfigError

from .config import SlurmConfig

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JOB_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
COMMENT_PREFIX = "foundry"
CLAIM_FILE = "launch.claim"   # "job ID" (taken by the batch script) or "abandoned" (reclaim.py)


def secret_path(job_dir: str, path: str) -> str:
    """Where a SecretMount's file lives on the cluster: inside the job's private secrets/ folder."""
    rel = PurePosixPath(path.lstrip("/"))
    if ".." in rel.parts or not rel.parts:
        raise ConfigError(f"secret file path {path!r} is not allowed", hint="use a path without '..'")
    return str(PurePosixPath(job_dir) / "secrets" / rel)


def job_environment(request: JobRequest, job_dir: str) -> dict[str, str]:
    """The job's environment: the request's env, secret-file paths rewritten to the job folder."""
    env: dict[str, str] = {}
    for key, value in request.env.items():
        if not _ENV_NAME.match(key):
            raise ConfigError(f"environment variable name {key!r} is not valid")
        for mount in request.secret_files:
            if mount.path in value:
                value = value.replace(mount.path, secret_path(job_dir, mount.path))
        env[key] = value
    env.update({
        "RUN_NAME": request.run_name,
        "RUN_ID": request.run_id,
        "RESUMPTION_INDEX": str(request.resumption),
    })
    return env


def render_env(env: dict[str, str]) -> str:
    """`env.sh`: sourced by the batch script; written with mode 0600 at launch, never shown."""
    lines = ["# job environment written by foundry (mode 0600); values are never printed"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    return "\n".join(lines) + "\n"


def comment(request: JobRequest, job_dir: str) -> str:
    """Slurm job comment that lets `list()` find Foundry's jobs and rebuild their handles."""
    return "|".join([COMMENT_PREFIX, request.run_name, request.run_id, str(request.resumption), job_dir])


def parse_comment(text: str) -> dict[str, str] | None:
    parts = text.split("|")
    if len(parts) != 5 or parts[0] != COMMENT_PREFIX:
        return None
    return {"run_name": parts[1], "run_id": parts[2], "resumption": parts[3], "job_dir": parts[4]}


def worker_argv(request: JobRequest, cfg: SlurmConfig) -> list[str]:
    if not request.command:
        raise ConfigError("the run has no command", hint="set `command` in the run spec")
    argv = list(request.command)
    if argv[0].endswith(".py"):
        argv = [cfg.python, *argv]
    elif argv[0] in ("python", "python3"):
        argv[0] = cfg.python      # the cluster's interpreter (with torch) on the compute nodes
    return argv


def setup_snippet(request: JobRequest, exit_file: str | None) -> str:
    """The run spec's setup lines (integrations: git clone, pip install), run in a subshell before
    torchrun; a failing line fails the job with its code."""
    lines = list(request.extra.get("setup_commands", []))
    if not lines:
        return ""
    record = f'echo "$rc" > {exit_file}; ' if exit_file else ""
    body = "\n".join(f"  {line}" for line in lines)
    return f"""( set -e
{body}
) || {{ rc=$?; echo "foundry: setup failed ($rc)"; {record}exit "$rc"; }}"""


def exit_code_snippet(dir_expr: str) -> str:
    """Bash that turns torchrun's `$rc` into the job's exit code from the per-rank exit files."""
    return f"""# torchrun reports 1 when a worker exits non-zero: report the workers' own code instead. A pause
# is every rank exiting {PAUSED_EXIT_CODE} (or 143 when torchrun tore it down after the others paused).
paused=0; failed=""
for f in "{dir_expr}"/ranks/*.exit; do
  [ -e "$f" ] || continue
  code=$(cat "$f")
  case $code in {PAUSED_EXIT_CODE}) paused=1 ;; 0|143) ;; *) failed=${{failed:-$code}} ;; esac
done
if [ -n "$failed" ] && [ "$rc" != 0 ]; then rc=$failed
elif [ "$paused" = 1 ]; then rc={PAUSED_EXIT_CODE}; fi"""


def claim_snippet() -> str:
    """The job claims its folder first: a launch the control plane abandoned (its launcher died
    before recording the job) never runs; a requeued job finds its own claim and goes on."""
    return f"""claim="$FOUNDRY_JOB_DIR/{CLAIM_FILE}"
echo "job $SLURM_JOB_ID" > "$claim.$SLURM_JOB_ID" && ln "$claim.$SLURM_JOB_ID" "$claim" 2>/dev/null; rm -f "$claim.$SLURM_JOB_ID"
if [ "$(cat "$claim" 2>/dev/null)" != "job $SLURM_JOB_ID" ]; then
  echo "foundry: this launch was abandoned by the control plane; not running"; exit 0
fi"""


def render_sbatch(request: JobRequest, cfg: SlurmConfig, job_dir: str) -> str:
    if request.nodes < 1 or request.procs_per_node < 1:
        raise ConfigError("nodes and processes per node must be at least 1")
    q = shlex.quote
    d = PurePosixPath(job_dir)
    opts = [
        f"--job-name={_JOB_NAME_BAD.sub('-', request.run_name)[:64]}",
        f"--nodes={request.nodes}",
        "--ntasks-per-node=1",
        f"--output={d / 'slurm-%j.out'}",
        "--open-mode=append",
        "--no-requeue",
        f"--comment={comment(request, job_dir)}",
    ]
    if cfg.partition:
        opts.append(f"--partition={cfg.partition}")
    if cfg.account:
        opts.append(f"--account={cfg.account}")
    time_limit = request.extra.get("time") or cfg.time
    if time_limit:
        opts.append(f"--time={time_limit}")
    if cfg.cpus_per_task:
        opts.append(f"--cpus-per-task={cfg.cpus_per_task}")
    if request.gpus_per_node:
        kind = f"{request.gpu_type}:" if request.gpu_type else ""
        opts.append(f"--gres={cfg.gres}:{kind}{request.gpus_per_node}")
    if cfg.signal:
        opts.append(f"--signal=B:{cfg.signal}")
    workdir = request.workdir or cfg.workdir or request.extra.get("submit_dir")
    if workdir:   # otherwise jobs would start wherever the process that submits (a retry, a resume) stands
        opts.append(f"--chdir={workdir}")
    opts += cfg.sbatch_args
    header = "\n".join(f"#SBATCH {o}" for o in opts)
    torchrun = [
        cfg.python, "-m", "torch.distributed.run",
        '--nnodes="$NNODES"', f"--nproc_per_node={request.procs_per_node}",
        "--rdzv_backend=c10d", '--rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"', '--rdzv_id="$SLURM_JOB_ID"',
        "--max_restarts=0", f"--log_dir={q(str(d / 'torchelastic'))}",   # not a folder left in each node's /tmp
        "--no-python", "bash", q(str(d / "rank.sh")),
    ]
    torchrun_line = " ".join(t if t.startswith("--") or t == "bash" else q(t) for t in torchrun)
    node_env = ""
    if request.extra.get("launch") == "per_node":   # mcli: the command runs once per node, starts its ranks
        node_cmd = f'export RANK=$SLURM_NODEID NODE_RANK=$SLURM_NODEID; exec bash {q(str(d / "rank.sh"))} "$@"'
        torchrun_line = f"bash -c {q(node_cmd)} foundry-node"
        node_env = ('export NUM_NODES=$NNODES LOCAL_WORLD_SIZE=$NPROC_PER_NODE '
                    'WORLD_SIZE=$(( NNODES * NPROC_PER_NODE ))   # launch: per_node (mcli)')
    command = " ".join(q(a) for a in worker_argv(request, cfg))
    setup = "\n".join([*cfg.setup, setup_snippet(request, '"$FOUNDRY_JOB_DIR/exit_code"')]).strip()
    path_line = f'export PATH={q(str(PurePosixPath(cfg.python).parent))}:"$PATH"' if cfg.python.startswith("/") else ""
    secret_lines = "\n".join(
        f"#   {m.path} -> {secret_path(job_dir, m.path)} (mode {m.mode:o})" for m in request.secret_files
    ) or "#   (none)"
    return f"""#!/bin/bash
{header}
# Generated by foundry: run {request.run_name} ({request.run_id}), resumption {request.resumption}.
# Secret files (written at launch, 0600, in a 0700 folder):
{secret_lines}
set -uo pipefail
export FOUNDRY_JOB_DIR={q(job_dir)}
{claim_snippet()}
set -a; source "$FOUNDRY_JOB_DIR/env.sh"; set +a   # env + secrets, mode 0600
export RUN_NAME={q(request.run_name)} RUN_ID={q(request.run_id)} RESUMPTION_INDEX={request.resumption}
export FOUNDRY_SECRETS_DIR="$FOUNDRY_JOB_DIR/secrets" PYTHONUNBUFFERED=1
{path_line}
{setup}
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
export MASTER_PORT=$(( {cfg.rdzv_port_base} + SLURM_JOB_ID % 10000 ))
export NNODES=$SLURM_JOB_NUM_NODES NPROC_PER_NODE={request.procs_per_node}
{node_env}
echo "foundry: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, rendezvous $MASTER_ADDR:$MASTER_PORT"

foundry_pause() {{  # SIGTERM once to every worker (not torchrun): they checkpoint and exit {PAUSED_EXIT_CODE}
  # Who asked: stop_requested is written by `foundry stop` before it signals; without it the SIGTERM is
  # Slurm's own (time-limit notice, or the kill after NODE_FAIL), which is not a user's stop.
  if [ -e "$FOUNDRY_JOB_DIR/stop_requested" ]; then origin=stop; else origin=slurm; fi
  echo "foundry: pause requested ($origin), signalling the ranks"
  echo "$origin" > "$FOUNDRY_JOB_DIR/pause_requested"
  bash "$FOUNDRY_JOB_DIR/pause.sh"
  if [ "$NNODES" -gt 1 ]; then
    srun --overlap --nodes=$((NNODES - 1)) --ntasks-per-node=1 --exclude="$SLURMD_NODENAME" \\
      bash "$FOUNDRY_JOB_DIR/pause.sh"
  fi
}}
trap foundry_pause TERM

srun --nodes="$NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 \\
  {torchrun_line} \\
  {command} &
SRUN_PID=$!
while kill -0 "$SRUN_PID" 2>/dev/null; do wait "$SRUN_PID"; done
wait "$SRUN_PID"; rc=$?

{exit_code_snippet('$FOUNDRY_JOB_DIR')}
echo "$rc" > "$FOUNDRY_JOB_DIR/exit_code.tmp" && mv "$FOUNDRY_JOB_DIR/exit_code.tmp" "$FOUNDRY_JOB_DIR/exit_code"
echo "foundry: job exited with $rc"
exit "$rc"
"""


def render_rank_wrapper(job_dir: str) -> str:
    """`rank.sh CMD...`: run one worker, record its pid and exit code, tee its output.

    The worker gets its own session (setsid): torchrun stops workers with killpg(SIGTERM), which
    would otherwise deliver a second SIGTERM to a worker that is checkpointing after a pause. The
    tee ignores SIGTERM so a pausing worker can still write its output.
    """
    d = shlex.quote(job_dir)
    HEARTBEAT_FOLDER, HEARTBEAT_INTERVAL = heartbeat.FOLDER, int(heartbeat.INTERVAL_S)  # noqa: N806
    HEARTBEAT_ENDED = heartbeat.ENDED  # noqa: N806
    return f"""#!/bin/bash
# one rank of a foundry job, started by torchrun (RANK, LOCAL_RANK set)
dir={d}
node=${{SLURMD_NODENAME:-$(hostname)}}
export NODE_RANK=${{GROUP_RANK:-${{NODE_RANK:-0}}}}   # torchrun's node rank (launch per_node: already set)
exec 3> >(trap '' TERM INT; exec tee -a "$dir/logs/rank-$RANK.log")
setsid "$@" >&3 2>&3 &
child=$!
exec 3>&-
# pid + its start time (/proc stat field 22): pause.sh signals this process only, never a reused pid
echo "$node $child $(cut -d')' -f2- /proc/$child/stat 2>/dev/null | awk '{{print $20}}')" > "$dir/ranks/$RANK.pid"
[ -e "$dir/pause_requested" ] && kill -TERM "$child" 2>/dev/null   # paused while starting
# the job's own evidence that it exists while the worker runs (plugins/heartbeat.py), beside metrics.jsonl
beat=""
hb="${{FOUNDRY_RUN_DIR:-}}/{HEARTBEAT_FOLDER}/${{RESUMPTION_INDEX:-0}}-$RANK"
if [ -n "${{FOUNDRY_RUN_DIR:-}}" ] && mkdir -p "${{hb%/*}}" 2>/dev/null; then
  ( trap '' TERM INT; while kill -0 "$child" 2>/dev/null; do touch "$hb" 2>/dev/null; sleep {HEARTBEAT_INTERVAL}; done ) </dev/null >/dev/null 2>&1 &
  beat=$!
fi
# torchrun tearing the workers down: forward, unless the worker was already asked to pause
trap '[ -e "$dir/pause_requested" ] || kill -TERM "$child" 2>/dev/null' TERM INT
while kill -0 "$child" 2>/dev/null; do wait "$child"; done
wait "$child"; rc=$?
if [ -n "$beat" ]; then   # the beats stop; a worker that finished (exit 0) says so (plugins/heartbeat.py)
  kill -KILL "$beat" 2>/dev/null   # it ignores TERM
  [ "$rc" = 0 ] && mkdir -p "${{hb%/*}}/{HEARTBEAT_ENDED}" 2>/dev/null && touch "${{hb%/*}}/{HEARTBEAT_ENDED}/${{hb##*/}}" 2>/dev/null
fi
echo "$rc" > "$dir/ranks/$RANK.exit"
exit "$rc"
"""


def render_pause(job_dir: str) -> str:
    d = shlex.quote(job_dir)
    return f"""#!/bin/bash
# SIGTERM, once, to every worker of this job on this node
node=${{SLURMD_NODENAME:-$(hostname)}}
for f in {d}/ranks/*.pid; do
  [ -e "$f" ] || continue
  read -r host pid start < "$f"
  [ "$host" = "$node" ] || continue
  now=$(cut -d')' -f2- /proc/"$pid"/stat 2>/dev/null | awk '{{print $20}}')
  [ -n "$start" ] && [ "$now" != "$start" ] && continue      # that worker is gone; the pid is someone else's
  kill -TERM "$pid" 2>/dev/null && echo "foundry: SIGTERM to pid $pid on $node"
done
exit 0
"""


def render_files(request: JobRequest, cfg: SlurmConfig, job_dir: str) -> dict[str, str]:
    """The job folder's inspectable files (env.sh and secrets are written at launch only)."""
    return {
        "job.sbatch": render_sbatch(request, cfg, job_dir),
        "rank.sh": render_rank_wrapper(job_dir),
        "pause.sh": render_pause(job_dir),
    }
