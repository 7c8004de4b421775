"""The lifecycle of cloud instances made for one resumption, whatever the cloud (gce, oci-vm; ec2
follows the same steps in its own module).

launch(): (1) the ledger records the launch (token, run, resumption, count, the names it will ask
for) before anything is asked of the cloud; (2) the cloud's create request(s), labelled/tagged
foundry-token / foundry-run / foundry-resumption / foundry-cluster; (3) the ledger gets the ids;
(4) wait until every instance runs and answers SSH (deadline `ssh_wait_s`, a clear error);
(5) `SshProvider.for_hosts(addresses, private_key=..., user=ssh_user)` launches the job.
Any error after (1) terminates whatever was made. A process killed anywhere in there leaves a
launch intent whose `reclaim` finds the instances by their token and terminates them; `foundry
clean instances` does the same for any labelled instance whose resumption is not running.
status(): the ssh job's state; a terminal state terminates the instances first. An instance the
cloud ended under the job, or a spot job that paused with nobody asking (the trainer saw the
preemption notice: trainer/preemption.py), makes it LOST (preempted), retry-eligible.

A subclass says how its cloud does four things: create, lookup (by id), find (by label) and
delete; it returns `Vm` rows with the state reduced to pending / running / ended.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets as _secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.compute import Capabilities, JobHandle, JobRequest, JobState, JobStatus, Plan
from foundry.plugins.errors import ConfigError, ProviderError

from .catalogue import Catalogue
from .keys import public_key
from .ledger import Ledger
from .ssh_wait import ssh_answers

HOLD_ENV = "FOUNDRY_VM_HOLD_AT"   # tests: park the launch at a named step so it can be killed there
SSH_POLL_S = 2.0                  # between two looks at the new instances while waiting for SSH


class NoCapacityError(ProviderError):
    """The cloud has no capacity (or no quota) for the instances now: nothing was left running.
    Retry-eligible: the launcher records the resumption `lost`, so the watchdog retries it or fails
    it over to the run's next placement, as it does for a preempted one."""

    retry_eligible = True


@dataclass
class Vm:
    id: str
    state: str                       # pending | running | ended (stopped, preempted: still there) | gone
    address: str | None = None
    reason: str = ""                 # why it ended, when the cloud says
    labels: dict[str, str] = field(default_factory=dict)
    type: str = ""
    spot: bool = False
    started_at: float | None = None  # epoch seconds
    size: dict[str, float] = field(default_factory=dict)   # a flexible shape's ocpus / memory_gb (its price)


def label_value(text: str, limit: int = 63) -> str:
    """A value every cloud's labels accept (GCE's are the strictest: lowercase letters, digits, '-'
    and '_', at most 63 characters)."""
    return re.sub(r"[^a-z0-9_-]", "-", str(text).lower())[:limit]


class VmProvider:
    name = "vm"
    accepts_cluster_context = True   # state_dir (the ledger) and `secret` (the ssh key) resolved by Clusters
    notice: str | None = None        # FOUNDRY_PREEMPTION_NOTICE for spot jobs (trainer/preemption.py)
    ids_are_names = False            # the ids are the names chosen before the request (GCE): the ledger has them
    sdk_extra = "all"                # the pip extra that brings the cloud's SDK
    catalogue: Catalogue
    config_class: Any

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        raw = dict(cluster_config or {})
        self.config = self.config_class.from_dict(raw)
        self._injection = raw.get("secret_injection")
        self._credentials = raw.get("credentials_injection")
        self.state_dir = Path(self.config.state_dir or Path.home() / ".cache" / f"foundry-{self.name}" / self.config.name)
        self.ledger = Ledger(self.state_dir / "instances")
        gpu_type = self.catalogue.entry(self.config.machine_type).get("gpu_type")
        self.capabilities = Capabilities(multi_node=True, gpus=self.config.gpus > 0, graceful_stop=True,
                                         preemption_notice=self.config.spot and self.notice is not None,
                                         gpu_types=(gpu_type,) if gpu_type else ())

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        cls.config_class.from_dict(options)

    # ---- what a cloud implements
    def where(self) -> str:
        """Region or zone, for summaries."""
        raise NotImplementedError

    def check_plan(self, request: JobRequest) -> None:
        """ConfigError for what the cloud needs and the options do not give (an image...)."""

    def names(self, request: JobRequest, token: str) -> list[str]:
        """The names the instances will be given (recorded in the ledger before the request)."""
        return [f"{token}-{i}" for i in range(request.nodes)]

    def create_request(self, request: JobRequest, token: str, name: str, ssh_public_key: str) -> Any:
        raise NotImplementedError

    def create(self, request: JobRequest, token: str, names: list[str], ssh_public_key: str) -> list[str]:
        """Ask for the instances; their ids. NoCapacityError when the cloud has none (after deleting
        what it made of the launch); each id is written to the ledger as soon as it is known."""
        raise NotImplementedError

    def lookup(self, ids: list[str]) -> list[Vm]:
        """The instances with these ids (one that is gone: state `ended`)."""
        raise NotImplementedError

    def find(self, token: str | None = None) -> list[Vm]:
        """Instances of this cluster (of one launch when `token` is given), by label/tag."""
        raise NotImplementedError

    def delete(self, ids: list[str]) -> None:
        """Ask the cloud to delete them (not waited on); one already gone is no error."""
        raise NotImplementedError

    def labels(self, request: JobRequest, token: str) -> dict[str, str]:
        return {"foundry-token": token, "foundry-run": label_value(request.run_name),
                "foundry-run-id": label_value(request.run_id), "foundry-resumption": str(request.resumption),
                "foundry-cluster": label_value(self.config.name)}

    # ---- planning
    def _hold(self, step: str) -> None:
        if os.environ.get(HOLD_ENV) == step:
            (self.state_dir / f"held-{step}").touch()
            time.sleep(300)

    def price(self) -> float:
        """The hourly price of one instance of this cluster (catalogue; spot when spot)."""
        return self.catalogue.hourly_price(self.config.machine_type, self.config.spot)

    def vm_price(self, vm: Vm) -> float:
        return self.catalogue.hourly_price(vm.type, vm.spot)

    def dryrun(self, request: JobRequest) -> Plan:
        self.check_plan(request)
        if self.config.gpus and request.gpus_per_node > self.config.gpus:
            raise ConfigError(f"{self.name} cluster {self.config.name!r}: {self.config.machine_type} has "
                              f"{self.config.gpus} GPU(s); the run asks for {request.gpus_per_node} per node",
                              hint="use more nodes, or a larger machine type")
        key = self._private_key()   # refused here, before anything is made, when the key is missing
        public_key(key, self.config.name)
        # lowercase letters, digits and '-' only: a valid label value everywhere and part of GCE names
        slug = re.sub(r"[^a-z0-9]+", "-", request.run_name.lower())[:20].strip("-") or "run"
        token = f"{slug}-r{request.resumption}-{_secrets.token_hex(4)}"
        planned = dataclasses.replace(request, extra={**request.extra, "vm_token": token})
        summary = (f"{self.name} {self.where()}: {request.nodes} x {self.config.machine_type}"
                   f"{' (spot)' if self.config.spot else ''} at ${self.price():.3f}/h each, the job over ssh, "
                   f"deleted when the resumption ends")
        first = self.names(planned, token)[0]
        try:   # the request as the SDK will send it: its types refuse a malformed one here
            body = self.create_request(planned, token, first, "ssh-... (the secret's public key)")
        except ImportError:
            raise ConfigError(f"the {self.name} provider needs its cloud's SDK",
                              hint=f"pip install 'foundry-anywhere[{self.sdk_extra}]'") from None
        return Plan(provider=self.name, request=planned, summary=summary, artifacts={"create": repr(body)})

    def launch_intent(self, plan: Plan) -> dict[str, Any]:
        return {"token": plan.request.extra["vm_token"]}

    # ---- launching
    def launch(self, plan: Plan) -> JobHandle:
        request, token = plan.request, plan.request.extra["vm_token"]
        c = self.config
        names = self.names(request, token)
        self.ledger.write(token, state="intent", cluster=c.name, where=self.where(), run=request.run_name,
                          run_id=request.run_id, resumption=request.resumption, count=request.nodes, names=names,
                          instance_type=c.machine_type, spot=c.spot, price_per_hour=self.price())
        self._hold("before_request")
        try:
            ids = self.create(request, token, names, public_key(self._private_key(), c.name))
            self._hold("after_request")
            self.ledger.write(token, state="requested", instance_ids=ids, launched_at=time.time())
            self._hold("waiting_ssh")
            hosts = self._wait_ready(ids)
            ssh = self._ssh(hosts)
            if c.spot and self.notice:   # the trainer watches the preemption notice (trainer/preemption.py)
                request = dataclasses.replace(request, env={**request.env, "FOUNDRY_PREEMPTION_NOTICE": self.notice})
            ssh_handle = ssh.launch(ssh.dryrun(request))
        except BaseException:
            self.terminate(token)
            raise
        self.ledger.write(token, hosts=hosts)
        return JobHandle(provider=self.name, cluster=c.name, job_id=f"{self.name}-{token}",
                         data={"token": token, "instance_ids": ids, "hosts": hosts, "instances": len(ids),
                               "instance_type": c.machine_type, "spot": c.spot,   # for the run's cost
                               "price_per_hour": self.price() * len(ids),
                               "ssh_job_id": ssh_handle.job_id, "ssh": ssh_handle.data})

    def _wait_ready(self, ids: list[str]) -> list[str]:
        """Each instance's address once it runs and its port 22 answers with an SSH banner."""
        deadline = time.monotonic() + self.config.ssh_wait_s
        addresses: dict[str, str] = {}
        while True:
            for vm in self.lookup(ids):
                if vm.state in ("ended", "gone"):
                    raise ProviderError(f"{self.name}: instance {vm.id} ended before the job started "
                                        f"({vm.reason or 'no reason given'})")
                if vm.state == "running" and vm.address and ssh_answers(vm.address, port=22):
                    addresses[vm.id] = vm.address
            if len(addresses) == len(ids):
                return [addresses[i] for i in ids]
            if time.monotonic() > deadline:
                waiting = ", ".join(i for i in ids if i not in addresses)
                raise ProviderError(f"{self.name}: SSH did not answer on {waiting} within {self.config.ssh_wait_s:.0f}s "
                                    "(instances deleted)",
                                    hint="check that the firewall/security list lets this machine reach port 22 and "
                                         "the image runs sshd, or raise -o ssh_wait_s")
            time.sleep(min(SSH_POLL_S, self.config.ssh_wait_s))

    def _private_key(self) -> bytes:
        files = getattr(self._injection, "files", None) or {}
        key = next((v for p, v in files.items() if p.endswith("/id_key")), None)
        if key is None:
            raise ConfigError(f"{self.name} cluster {self.config.name!r} needs an ssh key: -o secret=NAME",
                              hint="foundry create secret ssh NAME --private-key PATH (its public key is given "
                                   "to the instances)")
        return key

    def _ssh(self, hosts: list[str]):
        from ..ssh import SshProvider

        return SshProvider.for_hosts(hosts, private_key=self._private_key(), user=self.config.ssh_user,
                                     name=self.config.name, state_dir=str(self.state_dir / "ssh"),
                                     gpus_per_host=self.config.gpus, **self.config.ssh_options)

    @staticmethod
    def _ssh_handle(handle: JobHandle) -> JobHandle:
        return JobHandle(provider="ssh", cluster=handle.cluster, job_id=handle.data["ssh_job_id"],
                         data=handle.data["ssh"])

    # ---- observing and ending
    def status(self, handle: JobHandle) -> JobStatus:
        gone = "; ".join(f"{vm.id} ({vm.reason or 'ended'})" for vm in self.lookup(handle.data["instance_ids"])
                         if vm.state in ("ended", "gone"))
        if gone:
            self.terminate(handle.data["token"])
            return JobStatus(JobState.LOST, reason=f"{self.name}: instance(s) ended under the job: {gone}")
        status = self._ssh(handle.data["hosts"]).status(self._ssh_handle(handle))
        if status.state.terminal:
            self.terminate(handle.data["token"])
            asked = (self.ledger.get(handle.data["token"]) or {}).get("stop_requested")
            if status.state is JobState.PAUSED and self.config.spot and not asked:
                # nobody here asked it to stop: it paused on the preemption notice
                return JobStatus(JobState.LOST, exit_code=status.exit_code, nodes=status.nodes,
                                 reason="preempted: preemption notice (paused with a checkpoint)")
        return status

    def logs(self, handle: JobHandle, follow: bool = False, rank: int | None = None) -> Iterator[str]:
        return self._ssh(handle.data["hosts"]).logs(self._ssh_handle(handle), follow=follow, rank=rank)

    def stop(self, handle: JobHandle, graceful: bool = True) -> None:
        self.ledger.write(handle.data["token"], stop_requested=time.time())   # a pause then is not a preemption
        try:
            self._ssh(handle.data["hosts"]).stop(self._ssh_handle(handle), graceful=graceful)
        finally:
            if not graceful:   # a hard stop: nothing to wait for (a graceful one ends at status: paused)
                self.terminate(handle.data["token"])

    def reclaim(self, intent: dict[str, Any]) -> JobHandle | None:
        """The launching process died before recording a handle: delete what it made; never adopt
        (the job was not started, or started without anyone recording how to stop it)."""
        self.terminate(intent["token"])
        return None

    def terminate(self, token: str) -> list[str]:
        """Delete every live instance of one launch, found by its label and by the ledger's ids."""
        record = self.ledger.get(token) or {}
        ids = set(record.get("instance_ids") or []) | {vm.id for vm in self.find(token)}
        if self.ids_are_names:
            ids |= set(record.get("names") or [])
        live = sorted(vm.id for vm in self.lookup(sorted(ids)) if vm.state != "gone") if ids else []
        if live:
            self.delete(live)
        if record:
            self.ledger.write(token, state="terminated", instance_ids=sorted(ids),
                              ended_at=record.get("ended_at") or time.time())
        return live

    # ---- what Foundry has running, and the sweep
    def instances(self) -> list[dict[str, Any]]:
        """Live instances labelled by this cluster, with what each has cost so far (catalogue price)."""
        rows, now = [], time.time()
        for vm in self.find():
            if vm.state == "gone":
                continue
            price = self.vm_price(vm)
            hours = max(0.0, now - (vm.started_at or now)) / 3600
            rows.append({"instance": vm.id, "cluster": self.config.name, "provider": self.name,
                         "run": vm.labels.get("foundry-run"), "resumption": vm.labels.get("foundry-resumption"),
                         "token": vm.labels.get("foundry-token"), "type": vm.type, "spot": vm.spot, "state": vm.state,
                         "address": vm.address, "hours": round(hours, 4), "price_per_hour": price,
                         "cost": round(hours * price, 4)})
        return rows

    def clean_instances(self, keep_tokens: set[str]) -> list[str]:
        """Delete every live instance of this cluster whose launch token is not in `keep_tokens`
        (the resumptions that are running or still launching)."""
        tokens = {row["token"] for row in self.instances()} | {
            rec["token"] for rec in self.ledger.records() if rec.get("state") != "terminated"}
        return [i for t in sorted(tokens - keep_tokens - {None}) for i in self.terminate(t)]

    def list(self) -> list[JobHandle]:
        return []

    def describe(self) -> dict[str, Any]:
        nodes = 16   # from the configuration: capacity is what the cloud will give (instances are made per run)
        return {"provider": self.name, "nodes": nodes, "gpus": nodes * self.config.gpus,
                "devices": nodes * (self.config.gpus or 1), "state": "ready", "where": self.where(),
                "instance_type": self.config.machine_type, "spot": self.config.spot, "price_per_hour": self.price()}
