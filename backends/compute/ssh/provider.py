"""The `ssh` compute provider: one torchrun per host of a fleet, over the system's OpenSSH client.

launch(): on each host in the cluster's order (unreachable or full hosts are skipped) the run's
environment is made ready (environment.py), its job folder written with the job's environment and
secret files (over ssh's stdin, 0600) and the host's GPU lease taken (leases.py); the first host
chosen serves the c10d rendezvous; then each host's launcher (host_job.py) starts detached and its
pid + start time go into the handle. Per host, REMOTE_DIR/jobs/RUN-rN-TOKEN/ holds job.json, job.log,
ranks/rank-N.{pid,log,exit} and exit.json, as the local provider keeps them.
status(): every host's record. A host that is not there (connection refused, no route, connect timed
out; asked twice) while another host of the job answers makes the job LOST (retry-eligible): the hosts
still running it are killed (they cannot go on without it) so their GPUs are free for the retry. No
host answering, or one only slow (no ssh banner in time), is no evidence: UNKNOWN, and the watchdog's
heartbeat rule decides.
stop(): graceful sends one SIGTERM to each training process through its recorded pid (exit 75 ->
PAUSED); a hard stop SIGKILLs each rank's process group.

A VM provider hands its instances over with `SshProvider.for_hosts(hosts, private_key=..., user=...)`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import secrets as _secrets
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.compute import (Capabilities, JobHandle, JobRequest, JobState, JobStatus, Plan)
from foundry.plugins.errors import ConfigError, ProviderError

from . import environment
from .client import HostUnreachable, SshClient, materialize_key
from .config import Host, SshConfig
from .remote import BUSY_EXIT

AGENT = "foundry.backends.compute.ssh.remote"
CONFIRM_S = 2.0   # before a host that does not answer counts as gone, it is asked once more


class HostBusy(ProviderError):
    """The host has fewer free GPUs than the job needs (leases held by other runs)."""


class SshProvider:
    name = "ssh"
    accepts_cluster_context = True   # Clusters passes state_dir and the resolved `secret` (secret_injection)

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        raw = dict(cluster_config or {})
        self.config = SshConfig.from_dict(raw)
        self._injection = raw.get("secret_injection")
        self._private_key: bytes | None = None   # for_hosts: handed over in memory, never in clusters.yaml
        self.state_dir = Path(self.config.state_dir or Path.home() / ".cache" / "foundry-ssh" / self.config.name)
        self.capabilities = Capabilities(multi_node=True, gpus=self.config.gpus_per_host > 0, graceful_stop=True,
                                         max_nodes=len(self.config.hosts), launch_modes=("per_process",))
        self._client: SshClient | None = None

    @staticmethod
    def check_options(options: dict[str, Any]) -> None:
        """`foundry create cluster` refuses bad options before writing them (ConfigError)."""
        SshConfig.from_dict(options)

    @classmethod
    def for_hosts(cls, hosts: list[str], *, private_key: bytes, user: str | None = None, name: str = "ssh",
                  state_dir: str | None = None, **options: Any) -> "SshProvider":
        """The entry point for providers that make machines (cloud VMs): their addresses, the key they
        were given and the login user; any cluster option (gpus_per_host, python, known_hosts...) too."""
        raw = {"name": name, "hosts": list(hosts), "user": user, "state_dir": state_dir, **options}
        provider = cls({**raw, "secret_injection": {}})
        provider._private_key = private_key   # in memory; written only as the 0600 file ssh reads
        return provider

    # ---- reaching the hosts
    @property
    def client(self) -> SshClient:
        if self._client is None:
            self._client = SshClient(self.config, self._key_file(), self.state_dir)
        return self._client

    def _key_file(self) -> str:
        if self.config.identity_file:
            path = Path(self.config.identity_file).expanduser()
            if not path.is_file():
                raise ConfigError(f"ssh cluster {self.config.name!r}: identity_file {path} does not exist")
            return str(path)
        key = self._private_key
        if key is None and self._injection is not None:
            files = getattr(self._injection, "files", {}) or {}
            key = next((c for p, c in files.items() if p.endswith("/id_key")), None)
            if key is None:
                raise ConfigError(f"ssh cluster {self.config.name!r}: secret {self.config.secret!r} is not an ssh secret",
                                  hint="foundry create secret ssh NAME --private-key PATH")
        if key is None:
            raise ConfigError(f"ssh cluster {self.config.name!r}: its key (secret {self.config.secret!r}) was not given",
                              hint="create the cluster through foundry (which reads the secret), or set identity_file")
        return str(materialize_key(self.state_dir, key))

    def _agent(self, host: Host, python: str, *args: str, stdin: dict | None = None, timeout: float = 60) -> Any:
        proc = self.client.run(host, [python, "-m", AGENT, *args], check=False, timeout=timeout,
                               stdin=json.dumps(stdin).encode() if stdin is not None else None)
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        if proc.returncode == BUSY_EXIT:
            raise HostBusy(f"ssh {host}: {err[-1] if err else 'no free GPUs'}")
        if proc.returncode != 0:
            raise ProviderError(f"ssh {host}: {args[0]} failed ({proc.returncode}): {err[-1] if err else ''}")
        return proc.stdout if args[0] == "read" else json.loads(proc.stdout)

    # ---- planning (no side effects)
    def dryrun(self, request: JobRequest) -> Plan:
        hosts, per_host = self.config.hosts, self.config.gpus_per_host
        if request.nodes > len(hosts):
            raise ConfigError(f"ssh cluster {self.config.name!r} has {len(hosts)} host(s); the run asks for {request.nodes}",
                              hint="use fewer nodes (--nodes), or add hosts to the cluster")
        if per_host and request.gpus_per_node > per_host:
            raise ConfigError(f"ssh cluster {self.config.name!r} has {per_host} GPU(s) per host; "
                              f"the run asks for {request.gpus_per_node} per node",
                              hint="use more nodes and fewer GPUs per node")
        token = _secrets.token_hex(3)
        planned = dataclasses.replace(request, extra={**request.extra, "ssh_token": token})
        job = {"job_id": f"ssh-{token}", "nnodes": request.nodes, "nprocs": request.procs_per_node,
               "rdzv_endpoint": f"{hosts[0].addr}:PORT", "command": self._command(request, "PYTHON")}
        from .host_job import torchrun_argv

        argv = torchrun_argv(job, Path(self._job_dir(hosts[0], request, token)), "PYTHON")
        torchrun = shlex.join(["torchrun", *argv[3:]])   # argv[:3]: python -c <torchrun minus its stop traceback>
        gpus = f", {request.gpus_per_node} GPU(s) each (leased)" if request.gpus_per_node else ""
        summary = (f"ssh: {request.nodes} of {len(hosts)} host(s) x {request.procs_per_node} process(es){gpus}, "
                   f"one torchrun per host, c10d rendezvous on the first")
        artifacts = {"hosts": "\n".join(str(h) for h in hosts),
                     "ssh": shlex.join(self.client_argv_preview(hosts[0])),
                     "torchrun": torchrun}
        return Plan(provider=self.name, request=planned, summary=summary, artifacts=artifacts)

    def client_argv_preview(self, host: Host) -> list[str]:
        preview = SshClient(self.config, "KEY", self.state_dir)
        return preview.argv(host, "COMMAND")

    def _job_dir(self, host: Host, request: JobRequest, token: str) -> str:
        return f"{self.config.remote_root(host)}/jobs/{request.run_name}-r{request.resumption}-{token}"

    @staticmethod
    def _command(request: JobRequest, python: str) -> list[str]:
        command = list(request.command)
        if command and command[0].endswith(".py"):   # a script: the host's job python runs it (as slurm does)
            command = [python, *command]
        return command

    # ---- launching
    def launch(self, plan: Plan) -> JobHandle:
        request = plan.request
        token = request.extra.get("ssh_token")
        if not token:
            raise ProviderError("ssh: this plan was not made by the ssh provider's dryrun")
        job_id = f"ssh-{token}"
        chosen: list[dict] = []
        skipped: list[str] = []

        def attempt(host: Host) -> dict | Exception:
            try:
                try:
                    return self._prepare_host(host, request, token, job_id)
                except HostUnreachable as exc:
                    if exc.definite:
                        raise
                    return self._prepare_host(host, request, token, job_id)   # only slow (loaded): once more
            except Exception as exc:   # collected, not raised: the batch's other hosts may hold leases
                return exc

        pool = ThreadPoolExecutor(max_workers=min(8, len(self.config.hosts)))
        try:
            pending = list(self.config.hosts)
            while len(chosen) < request.nodes and pending:   # the first hosts in order, in parallel
                batch, pending = pending[:request.nodes - len(chosen)], pending[request.nodes - len(chosen):]
                outcomes = list(pool.map(attempt, batch))
                chosen += [o for o in outcomes if isinstance(o, dict)]
                errors = [o for o in outcomes if isinstance(o, Exception)]
                fatal = next((e for e in errors if not isinstance(e, (HostUnreachable, HostBusy))), None)
                if fatal is not None:
                    raise fatal
                skipped += [e.message for e in errors]
            if len(chosen) < request.nodes:
                raise ProviderError(f"ssh cluster {self.config.name!r}: {len(chosen)} of the {request.nodes} host(s) "
                                    f"the run needs are ready ({'; '.join(skipped)})",
                                    hint="free GPUs (stop a run), bring the hosts back, or ask for fewer nodes")
            rdzv = f"{chosen[0]['host_obj'].addr}:{chosen[0]['port']}"   # a port free on the first host

            def start(node_entry):
                node, entry = node_entry
                job = {"job_id": job_id, "run_name": request.run_name, "host": str(entry["host_obj"]), "node": node,
                       "nnodes": request.nodes, "nprocs": request.procs_per_node, "rdzv_endpoint": rdzv,
                       "command": self._command(request, entry["python"]), "gpus": entry["gpus"],
                       "setup_commands": [*self.config.setup, *request.extra.get("setup_commands", [])],
                       "secret_paths": [m.path for m in request.secret_files], "notes": entry["notes"],
                       "workdir": request.workdir or self.config.workdir,
                       "lease_file": entry["lease_file"] if entry["gpus"] is not None else None}
                files = {"job.json": [base64.b64encode(json.dumps(job, indent=1).encode()).decode(), 0o600]}
                started = self._agent(entry["host_obj"], entry["python"], "prepare",
                                      stdin={"job_dir": entry["job_dir"], "files": files, "lease": None, "start": True})
                entry.update(pid=started["pid"], create_time=started["create_time"])

            list(pool.map(start, enumerate(chosen)))
        except BaseException:
            self._abandon(chosen, job_id)
            raise
        finally:
            pool.shutdown(wait=True)
        hosts = [{k: v for k, v in e.items() if k not in ("host_obj", "notes")} for e in chosen]
        return JobHandle(provider=self.name, cluster=self.config.name, job_id=job_id,
                         data={"hosts": hosts, "nodes": request.nodes, "rdzv": rdzv, "run_name": request.run_name,
                               "resumption": request.resumption})

    def _prepare_host(self, host: Host, request: JobRequest, token: str, job_id: str) -> dict:
        ready = environment.ensure(self.client, host, self.config)
        job_dir = self._job_dir(host, request, token)
        lease_file = f"{self.config.remote_root(host)}/leases.json"
        files = {"env.json": [base64.b64encode(json.dumps(request.env).encode()).decode(), 0o600]}
        for mount in request.secret_files:
            files["secrets/" + mount.path.lstrip("/")] = [base64.b64encode(mount.content).decode(), mount.mode or 0o600]
        lease = ({"file": lease_file, "job_id": job_id, "count": request.gpus_per_node,
                  "total": self.config.gpus_per_host} if request.gpus_per_node and self.config.gpus_per_host else None)
        out = self._agent(host, ready.python, "prepare", stdin={"job_dir": job_dir, "files": files, "lease": lease})
        notes = [ready.note(host)] + ([f"GPUs {out['gpus']} of {host} leased"] if out["gpus"] is not None else [])
        return {"host": str(host), "host_obj": host, "python": ready.python, "job_dir": out["job_dir"],
                "gpus": out["gpus"], "lease_file": lease_file, "notes": notes, "env_seconds": round(ready.seconds, 2),
                "port": out["port"]}

    def _abandon(self, chosen: list[dict], job_id: str) -> None:
        """A launch that failed half-way: stop what started, give the leases back."""
        for entry in chosen:
            host = entry["host_obj"]
            try:
                if entry.get("pid"):
                    self._agent(host, entry["python"], "signal", entry["job_dir"], "kill")
                elif entry["gpus"] is not None:
                    self._agent(host, entry["python"], "release", entry["lease_file"], job_id)
            except ProviderError:
                pass

    # ---- observing
    @staticmethod
    def _hosts(handle: JobHandle) -> list[tuple[Host, dict]]:
        return [(Host.parse(h["host"]), h) for h in handle.data["hosts"]]

    def status(self, handle: JobHandle) -> JobStatus:
        nodes = handle.data.get("nodes")
        results: dict[str, dict] = {}
        gone: list[str] = []

        def one(item):
            host, entry = item
            try:
                return str(host), self._agent(host, entry["python"], "status", entry["job_dir"], timeout=30)
            except HostUnreachable as exc:
                return str(host), exc

        slow: list[str] = []
        hosts = self._hosts(handle)
        with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
            answers = list(pool.map(one, hosts))
            again = [i for i, (_, a) in enumerate(answers) if isinstance(a, HostUnreachable) and a.definite]
            if again:   # a host gone is asked once more: a blip of the link is not a lost job
                time.sleep(CONFIRM_S)
                for i, answer in zip(again, pool.map(one, [hosts[i] for i in again])):
                    answers[i] = answer
        for host, answer in answers:
            if isinstance(answer, HostUnreachable):
                (gone if answer.definite else slow).append(f"host {host} stopped answering ({answer.message})")
            else:
                results[host] = answer
        vanished = [f"the launcher on {h} disappeared without an exit record"
                    for h, r in results.items() if r["exit"] is None and not r["alive"]]
        if vanished or (gone and results):
            # evidence: a host of the job answered (this machine's network works) and another is not there
            self._kill_survivors(handle, results)
            return JobStatus(JobState.LOST, exit_code=None, reason="; ".join(gone + vanished), nodes=nodes)
        if gone or slow:   # no host answered, or one is only slow: no evidence (the watchdog's heartbeat decides)
            return JobStatus(JobState.UNKNOWN, reason="; ".join(gone + slow), nodes=nodes)
        if any(r["exit"] is None for r in results.values()):
            stopping = any(r["stop"] for r in results.values())
            return JobStatus(JobState.STOPPING if stopping else JobState.RUNNING, nodes=nodes)
        return aggregate({h: r["exit"] for h, r in results.items()}, nodes)

    def _kill_survivors(self, handle: JobHandle, results: dict[str, dict], wait_s: float = 30.0) -> None:
        """The hosts still running a job that lost a member: it cannot go on, and their GPUs are needed
        by the retry that follows at once, so wait (a while) for their launchers' exit records, written
        after the leases are given back."""
        alive = [(h, e) for h, e in self._hosts(handle) if results.get(str(h), {}).get("alive")]
        for host, entry in alive:
            try:
                self._agent(host, entry["python"], "signal", entry["job_dir"], "kill", timeout=30)
            except ProviderError:
                pass
        deadline = time.monotonic() + wait_s
        while alive and time.monotonic() < deadline:
            time.sleep(0.5)
            still = []
            for host, entry in alive:
                try:
                    if self._agent(host, entry["python"], "status", entry["job_dir"], timeout=30)["alive"]:
                        still.append((host, entry))
                except ProviderError:
                    pass
            alive = still

    def logs(self, handle: JobHandle, follow: bool = False, rank: int | None = None) -> Iterator[str]:
        """Every host's job.log (lines prefixed with the host when there are several), or one rank's
        log from the host that ran it. A host whose log could not be read (ssh failed or timed out) is
        never passed over in silence: after what the others gave, one `[foundry]` line per such host
        says why (a line, not an error: following a run goes on past a lost host, and the TUI and
        the failure reason read logs too)."""
        hosts = self._hosts(handle)
        if rank is None:
            sources = [(h, e, f"{e['job_dir']}/job.log", f"[{h.addr}] " if len(hosts) > 1 else "") for h, e in hosts]
        else:
            sources = [(h, e, f"{e['job_dir']}/ranks/rank-{rank}.log", "") for h, e in hosts]
        offsets = [0] * len(sources)
        pending = [b""] * len(sources)
        owner: int | None = None          # for a rank: the host whose file has content
        failed: dict[int, str] = {}       # source -> why its last read failed (a read that works clears it)
        while True:
            got = False
            for i, (host, entry, path, prefix) in enumerate(sources):
                if owner is not None and i != owner:
                    continue
                try:
                    chunk = self._agent(host, entry["python"], "read", path, str(offsets[i]), timeout=30)
                except ProviderError as exc:   # followed: asked again on the next pass
                    failed[i] = exc.message
                    continue
                failed.pop(i, None)
                if not chunk:
                    continue
                got = True
                if rank is not None:
                    owner = i
                offsets[i] += len(chunk)
                *lines, pending[i] = (pending[i] + chunk).split(b"\n")
                for line in lines:
                    yield prefix + line.decode(errors="replace")
            if not follow:
                break
            if not got:
                if self.status(handle).state.terminal:
                    follow = False   # one more pass drains what was written last
                    continue
                time.sleep(0.5)
        for i, rest in enumerate(pending):
            if rest:
                yield sources[i][3] + rest.decode(errors="replace")
        if owner is not None:   # one rank's log: the hosts that do not hold it do not matter
            failed = {i: why for i, why in failed.items() if i == owner}
        what = f"rank {rank}'s log" if rank is not None else "the job's log"
        for i in sorted(failed):
            yield f"{sources[i][3]}[foundry] {what} on {sources[i][0]} could not be read: {failed[i]}"

    # ---- stopping
    def stop(self, handle: JobHandle, graceful: bool = True) -> None:
        for host, entry in self._hosts(handle):
            try:
                self._agent(host, entry["python"], "signal", entry["job_dir"], "graceful" if graceful else "kill")
            except HostUnreachable:
                pass   # status() reports the job lost

    def list(self) -> list[JobHandle]:
        return []   # jobs are found through the run registry's handles

    def describe(self) -> dict[str, Any]:
        """From the configuration (no ssh: `get clusters` and every launch's capacity check call it)."""
        n, g = len(self.config.hosts), self.config.gpus_per_host
        return {"provider": self.name, "nodes": n, "gpus": n * g, "devices": n * g or n, "state": "ready",
                "hosts": [str(h) for h in self.config.hosts]}


def aggregate(records: dict[str, dict], nodes: int | None) -> JobStatus:
    """The job's state from each host's exit record. A rank killed or vanished on any host (nobody
    asked) is a system failure, whatever its peers then did (they fail when a peer goes): LOST.
    Otherwise a rank's own error on any host is FAILED; all completed is COMPLETED; else PAUSED."""
    def killed(rec: dict) -> bool:
        return rec["state"] == "lost" and any(c is None or c == -9 for c in (rec.get("ranks") or {}).values())

    order = sorted(records)
    for test, state in ((killed, JobState.LOST), (lambda r: r["state"] == "failed", JobState.FAILED),
                        (lambda r: r["state"] == "lost", JobState.LOST)):
        hit = next((h for h in order if test(records[h])), None)
        if hit is not None:
            rec = records[hit]
            return JobStatus(state, exit_code=rec.get("exit_code"), reason=rec.get("reason"), nodes=nodes)
    if all(records[h]["state"] == "completed" for h in order):
        return JobStatus(JobState.COMPLETED, exit_code=0, reason="all ranks exited 0", nodes=nodes)
    paused = next(records[h] for h in order if records[h]["state"] == "paused")
    return JobStatus(JobState.PAUSED, exit_code=paused.get("exit_code"), reason=paused.get("reason"), nodes=nodes)
