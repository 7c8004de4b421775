"""The ssh provider's fast tier: its options, the ssh command it runs (host keys pinned on first use,
checked strictly when given), what ssh's failures mean, GPU leases on a host, how hosts' exit records
make the job's state, and the cluster's secret reaching it through the control plane. No ssh runs
here (tests/multinode/test_ssh_fleet.py drives real sshd's)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from foundry.backends.compute.ssh import SshProvider
from foundry.backends.compute.ssh import leases
from foundry.backends.compute.ssh.client import HostUnreachable, SshClient, materialize_key, ssh_error
from foundry.backends.compute.ssh.config import Host, SshConfig
from foundry.backends.compute.ssh.environment import venv_script
from foundry.backends.compute.ssh.host_job import classify_host, relocated, torchrun_argv
from foundry.backends.compute.ssh.provider import aggregate
from foundry.plugins.compute import JobRequest, JobState
from foundry.plugins.errors import ConfigError, CredentialsError

KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----\n"


def provider(tmp_path, **options) -> SshProvider:
    opts = {"gpus_per_host": 1, "python": "/opt/venv/bin/python", **options}
    return SshProvider.for_hosts(["root@10.0.0.1", "10.0.0.2:2222"], private_key=KEY, user="ubuntu",
                                 name="fleet", state_dir=str(tmp_path / "state"), **opts)


def request(**kw) -> JobRequest:
    base = dict(run_name="tiny", run_id="id1", resumption=0, command=["train.py", "--x"], nodes=2,
                procs_per_node=1, gpus_per_node=1, env={"AWS_SECRET_ACCESS_KEY": "s3cr3t-value"})
    return JobRequest(**{**base, **kw})


def test_ssh_is_a_builtin_compute_plugin():
    from foundry.plugins.manager import compute_registry

    reg = compute_registry().get("ssh")
    assert reg is not None and reg.plugin == "foundry.backends.compute.plugin" and reg.value is SshProvider


# ---- options
def test_hosts_parse_from_the_cli_form_with_users_and_ports():
    cfg = SshConfig.from_dict({"hosts": "root@10.0.0.1,10.0.0.2:2222", "user": "ubuntu", "secret": "k",
                               "gpus_per_host": 2})
    assert cfg.hosts == [Host("10.0.0.1", "root", 22), Host("10.0.0.2", "ubuntu", 2222)]
    assert [str(h) for h in cfg.hosts] == ["root@10.0.0.1", "ubuntu@10.0.0.2:2222"]
    assert cfg.hosts[1].known_hosts_name == "[10.0.0.2]:2222"
    assert cfg.remote_root(cfg.hosts[0]) == ".foundry-fleet/10.0.0.1"   # hosts sharing an NFS home stay apart


@pytest.mark.parametrize("raw, says", [
    ({"secret": "k"}, "needs hosts"),
    ({"hosts": "root@10.0.0.1"}, "needs secret"),
    ({"hosts": "root@bad host", "secret": "k"}, "is not [user@]address[:port]"),
    ({"hosts": "a,a", "secret": "k"}, "listed twice"),
    ({"hosts": "a", "secret": "k", "gpus_per_host": "many"}, "whole numbers"),
    ({"hosts": "a", "secret": "k", "colour": "red"}, "unknown key(s) colour"),
    ({"hosts": "a", "secret": "k", "ssh_options": ["ProxyCommand nc %h"]}, "OpenSSH -o settings"),
])
def test_bad_options_are_one_clear_error(raw, says):
    with pytest.raises(ConfigError) as exc:
        SshConfig.from_dict(raw)
    assert says in exc.value.message


# ---- the ssh command
def test_first_use_pins_host_keys_in_the_clusters_own_file(tmp_path):
    client = SshClient(SshConfig.from_dict({"hosts": "root@10.0.0.1", "secret": "k"}), "/k/id", tmp_path)
    argv = client.argv(Host("10.0.0.1", "root"), "echo hi")
    assert argv[0] == "ssh" and argv[-2:] == ["10.0.0.1", "echo hi"]
    opts = {argv[i + 1] for i, a in enumerate(argv) if a == "-o"}
    assert {f"UserKnownHostsFile={tmp_path / 'known_hosts'}", "StrictHostKeyChecking=accept-new",
            "IdentitiesOnly=yes", "BatchMode=yes", "GlobalKnownHostsFile=/dev/null"} <= opts
    assert argv[argv.index("-i") + 1] == "/k/id" and argv[argv.index("-l") + 1] == "root"


def test_known_hosts_given_up_front_are_checked_strictly(tmp_path):
    cfg = SshConfig.from_dict({"hosts": "h1:2200", "secret": "k", "known_hosts": str(tmp_path / "kh"),
                               "ssh_options": ["ServerAliveInterval=2"]})
    argv = SshClient(cfg, "/k/id", tmp_path).argv(cfg.hosts[0], "true")
    opts = [argv[i + 1] for i, a in enumerate(argv) if a == "-o"]
    assert f"UserKnownHostsFile={tmp_path / 'kh'}" in opts and "StrictHostKeyChecking=yes" in opts
    assert "ServerAliveInterval=2" in opts and argv[argv.index("-p") + 1] == "2200" and "-l" not in argv


def test_ssh_failures_say_what_to_do():
    host = Host("10.0.0.1", "root")
    changed = ssh_error(host, "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.",
                        "/home/kh")
    assert isinstance(changed, CredentialsError) and "not the one pinned in /home/kh" in changed.message
    assert "10.0.0.1" in changed.hint
    refused = ssh_error(host, "root@10.0.0.1: Permission denied (publickey).", "/kh")
    assert isinstance(refused, CredentialsError) and "authorized_keys" in refused.hint
    down = ssh_error(host, "ssh: connect to host 10.0.0.1 port 22: Connection timed out", "/kh")
    assert isinstance(down, HostUnreachable) and "Connection timed out" in down.message and down.definite
    assert ssh_error(host, "ssh: connect to host 10.0.0.1 port 22: Connection refused", "/kh").definite
    slow = ssh_error(host, "Connection timed out during banner exchange", "/kh")   # sshd there, busy
    assert isinstance(slow, HostUnreachable) and not slow.definite


def fake_agent(answers: dict):
    """`_agent` for status(): each host's answer, or the HostUnreachable it raises."""
    def agent(host, python, *args, **kw):
        answer = answers[str(host)]
        if isinstance(answer, Exception):
            raise answer
        if args[0] == "signal":   # a kill: its launcher writes the exit record and ends
            answers[str(host)] = {**answer, "alive": False, "exit": {"state": "failed"}}
            return {"signalled": [1]}
        return answer
    return agent


RUNNING = {"exit": None, "alive": True, "ranks": 1, "stop": False}
GONE = HostUnreachable("ssh h: Connection refused", definite=True)
SLOW = HostUnreachable("ssh h: Connection timed out during banner exchange")


@pytest.mark.parametrize("first, second, state", [
    (RUNNING, GONE, JobState.LOST),        # a peer answered: this machine's network works, the host is gone
    (GONE, GONE, JobState.UNKNOWN),        # nobody answered: maybe it is us (the heartbeat decides)
    (RUNNING, SLOW, JobState.UNKNOWN),     # only slow: no evidence
    (RUNNING, RUNNING, JobState.RUNNING),
])
def test_a_host_is_lost_only_on_evidence(tmp_path, monkeypatch, first, second, state):
    from foundry.backends.compute.ssh import provider as provider_module
    from foundry.plugins.compute import JobHandle

    p = provider(tmp_path)
    monkeypatch.setattr(provider_module, "CONFIRM_S", 0.0)
    answers = {"root@10.0.0.1": first, "ubuntu@10.0.0.2:2222": second}
    monkeypatch.setattr(p, "_agent", fake_agent(answers))
    handle = JobHandle("ssh", "fleet", "ssh-1", {"nodes": 2, "hosts": [
        {"host": "root@10.0.0.1", "python": "py", "job_dir": "/j"},
        {"host": "ubuntu@10.0.0.2:2222", "python": "py", "job_dir": "/j"}]})
    status = p.status(handle)
    assert status.state == state
    if state == JobState.LOST:   # the survivor was killed (its GPUs are free for the retry)
        assert "10.0.0.2:2222 stopped answering" in status.reason
        assert answers["root@10.0.0.1"]["alive"] is False


def test_a_log_that_could_not_be_read_says_why_instead_of_coming_back_empty(tmp_path, monkeypatch):
    from foundry.plugins.compute import JobHandle

    p = provider(tmp_path)
    gone = HostUnreachable("ssh ubuntu@10.0.0.2:2222: connect to host 10.0.0.2 port 2222: No route to host", definite=True)
    answers = {"root@10.0.0.1": b"one\ntwo\n", "ubuntu@10.0.0.2:2222": gone}

    def agent(host, python, *args, **kw):
        answer = answers[str(host)]
        if isinstance(answer, Exception):
            raise answer
        return answer[int(args[2]):]
    monkeypatch.setattr(p, "_agent", agent)
    handle = JobHandle("ssh", "fleet", "ssh-1", {"nodes": 2, "hosts": [
        {"host": "root@10.0.0.1", "python": "py", "job_dir": "/j"},
        {"host": "ubuntu@10.0.0.2:2222", "python": "py", "job_dir": "/j"}]})
    assert list(p.logs(handle)) == [   # what the host that answered gave, then why the other gave nothing
        "[10.0.0.1] one", "[10.0.0.1] two",
        "[10.0.0.2] [foundry] the job's log on ubuntu@10.0.0.2:2222 could not be read: ssh ubuntu@10.0.0.2:2222: "
        "connect to host 10.0.0.2 port 2222: No route to host"]
    answers["root@10.0.0.1"] = gone
    assert [line.split(" could not")[0] for line in p.logs(handle)] == [
        "[10.0.0.1] [foundry] the job's log on root@10.0.0.1", "[10.0.0.2] [foundry] the job's log on ubuntu@10.0.0.2:2222"]
    answers["ubuntu@10.0.0.2:2222"] = b"x\n"   # one rank's log: found on the second host, the first does not matter
    assert list(p.logs(handle, rank=1)) == ["x"]
    monkeypatch.setattr(p, "status", lambda h: type("S", (), {"state": JobState.COMPLETED})())
    followed = list(p.logs(handle, follow=True))   # followed: the same, once the job has ended
    assert followed == ["[10.0.0.2] x", f"[10.0.0.1] [foundry] the job's log on root@10.0.0.1 could not be read: {gone.message}"]


def test_the_key_is_a_0600_file_and_never_on_a_plan(tmp_path):
    path = materialize_key(tmp_path / "state", KEY)
    assert path.read_bytes() == KEY and (path.stat().st_mode & 0o777) == 0o600
    assert materialize_key(tmp_path / "state", KEY) == path
    plan = provider(tmp_path).dryrun(request())
    text = json.dumps(plan.artifacts) + plan.summary
    assert "not-a-real-key" not in text and "s3cr3t-value" not in text and "KEY" in plan.artifacts["ssh"]


def test_a_secret_of_another_kind_is_refused(tmp_path):
    from foundry.plugins.secrets import SecretInjection

    p = SshProvider({"name": "fleet", "hosts": "h", "secret": "s3", "state_dir": str(tmp_path),
                     "secret_injection": SecretInjection(env={"AWS_ACCESS_KEY_ID": "x"})})
    with pytest.raises(ConfigError, match="is not an ssh secret"):
        p.client


def test_the_cluster_secret_reaches_the_provider_through_the_control_plane(tmp_path, monkeypatch):
    from foundry.app.control import ControlPlane

    cp = ControlPlane()
    cp.create_secret("fleet-key", "ssh", {"private_key": KEY.decode()})
    cp.create_cluster("fleet", "ssh", {"hosts": "root@10.0.0.1,root@10.0.0.2", "gpus_per_host": 1,
                                       "secret": "fleet-key"})
    p = cp.clusters.provider("fleet")
    key_file = Path(p.client.key_file)
    assert key_file.read_bytes() == KEY and (key_file.stat().st_mode & 0o777) == 0o600
    assert str(key_file).startswith(str(cp.paths.home))
    info = {c.name: c for c in cp.list_clusters()}["fleet"]
    assert (info.provider, info.devices, info.nodes) == ("ssh", 2, 2)
    assert "not-a-real-key" not in json.dumps(info.to_dict(), default=str)
    cp.delete_cluster("fleet")
    assert not key_file.exists()   # the key's copy goes with the cluster


# ---- planning
def test_dryrun_shows_one_torchrun_per_host_with_c10d_on_the_first(tmp_path):
    plan = provider(tmp_path).dryrun(request(procs_per_node=1))
    assert "2 of 2 host(s) x 1 process(es)" in plan.summary
    torchrun = plan.artifacts["torchrun"]
    assert "--nnodes=2" in torchrun and "--rdzv_backend=c10d" in torchrun and "--rdzv_endpoint=10.0.0.1:PORT" in torchrun
    assert "PYTHON train.py --x" in torchrun   # a script runs with the host's job python
    assert plan.request.extra["ssh_token"]


def test_dryrun_refuses_more_than_the_fleet_has(tmp_path):
    with pytest.raises(ConfigError, match="has 2 host"):
        provider(tmp_path).dryrun(request(nodes=3))
    with pytest.raises(ConfigError, match="1 GPU"):
        provider(tmp_path).dryrun(request(procs_per_node=2, gpus_per_node=2))


def test_capacity_is_hosts_times_gpus_per_host(tmp_path):
    desc = provider(tmp_path, gpus_per_host=4).describe()
    assert (desc["nodes"], desc["gpus"], desc["devices"]) == (2, 8, 8)


def test_torchrun_argv_joins_the_rendezvous():
    job = {"job_id": "ssh-ab", "nnodes": 2, "nprocs": 4, "rdzv_endpoint": "10.0.0.1:29500", "command": ["py", "t.py"]}
    argv = torchrun_argv(job, Path("/j"), "/venv/bin/python")
    # the first host hosts the store whatever its hostname resolves to (a NATed public address); the others join
    assert "--rdzv_conf=is_host=1" in torchrun_argv({**job, "node": 0}, Path("/j"), "py")
    assert "--rdzv_conf=is_host=0" in torchrun_argv({**job, "node": 1}, Path("/j"), "py")
    assert argv[:2] == ["/venv/bin/python", "-c"]
    assert {"--nnodes=2", "--nproc_per_node=4", "--rdzv_endpoint=10.0.0.1:29500", "--rdzv_id=ssh-ab",
            "--max-restarts=0"} <= set(argv)
    assert argv[-5:] == ["foundry.backends.compute.local_rank", "/j", "--", "py", "t.py"]


def test_uv_venv_gets_the_cpu_index_on_cpu_fleets():
    cpu = venv_script(SshConfig.from_dict({"hosts": "h", "secret": "k", "packages": ["torch==2.13.0", "foundry-anywhere"]}),
                      ".foundry-fleet/h/venv")
    assert "uv venv -q --allow-existing .foundry-fleet/h/venv" in cpu
    assert "--index-url https://download.pytorch.org/whl/cpu" in cpu and "torch==2.13.0 foundry-anywhere" in cpu
    gpu = venv_script(SshConfig.from_dict({"hosts": "h", "secret": "k", "gpus_per_host": 8}), "v")
    assert "download.pytorch.org" not in gpu and "uv is not installed" in gpu


def test_secret_paths_point_at_the_jobs_copies():
    env = relocated({"GIT_SSH_COMMAND": "ssh -i /foundry/secrets/k/id_key", "X": "1"},
                    {"secret_paths": ["/foundry/secrets/k/id_key"]}, Path("/r/jobs/j"))
    assert env == {"GIT_SSH_COMMAND": "ssh -i /r/jobs/j/secrets/foundry/secrets/k/id_key", "X": "1"}


# ---- leases
def test_two_jobs_never_get_the_same_gpus_of_a_host(tmp_path):
    f = tmp_path / "leases.json"
    a = leases.take(f, "job-a", str(tmp_path / "a"), 2, 4)
    b = leases.take(f, "job-b", str(tmp_path / "b"), 2, 4)
    assert sorted(a + b) == [0, 1, 2, 3]
    with pytest.raises(leases.LeaseBusy, match="0 of 4 GPU"):
        leases.take(f, "job-c", str(tmp_path / "c"), 1, 4)
    assert leases.take(f, "job-a", str(tmp_path / "a"), 2, 4) == a   # taking again: the same devices
    leases.release(f, "job-a")
    assert leases.take(f, "job-c", str(tmp_path / "c"), 2, 4) == a


def test_concurrent_takes_are_serialized_by_the_lock(tmp_path):
    f = tmp_path / "leases.json"
    got, busy = [], []

    def take(i):
        try:
            got.append(leases.take(f, f"job-{i}", str(tmp_path / str(i)), 1, 3))
        except leases.LeaseBusy:
            busy.append(i)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(g for gs in got for g in gs) == [0, 1, 2] and len(busy) == 3


def test_a_lease_whose_job_ended_or_died_is_taken_back(tmp_path):
    f = tmp_path / "leases.json"
    ended, dead = tmp_path / "ended", tmp_path / "dead"
    ended.mkdir()
    dead.mkdir()
    leases.take(f, "ended", str(ended), 1, 2)
    leases.take(f, "dead", str(dead), 1, 2)
    (ended / "exit.json").write_text("{}")
    (dead / "pid").write_text(f"{os.getpid()} 1.0")   # this pid, another start time: not the launcher that took it
    assert sorted(leases.take(f, "new", str(tmp_path / "new"), 2, 2)) == [0, 1]


# ---- the job's state from the hosts' records
def rec(state, code=0, ranks=None, reason="r"):
    return {"state": state, "exit_code": code, "reason": reason, "ranks": ranks or {}}


def test_a_rank_killed_on_one_host_is_lost_even_when_its_peers_then_failed():
    st = aggregate({"h1": rec("failed", 1, {"0": 1}), "h2": rec("lost", 137, {"1": -9}, "h2: rank 1 was killed")}, 2)
    assert st.state == JobState.LOST and "h2" in st.reason


def test_a_ranks_own_error_is_failed_and_its_peers_sigterm_does_not_hide_it():
    st = aggregate({"h1": rec("failed", 3, {"0": 3}, "h1: rank 0 exited with code 3"),
                    "h2": rec("lost", 143, {"1": -15})}, 2)
    assert st.state == JobState.FAILED and st.exit_code == 3


def test_paused_and_completed():
    assert aggregate({"h1": rec("paused", 75), "h2": rec("paused", 75)}, 2).state == JobState.PAUSED
    assert aggregate({"h1": rec("completed"), "h2": rec("completed")}, 2).state == JobState.COMPLETED


def test_host_ranks_are_named_by_their_global_rank():
    state, code, reason = classify_host({2: 0, 3: 4}, 2, False)
    assert (state, code) == ("failed", 4) and reason == "rank 3 exited with code 4"
    assert classify_host({2: 75, 3: 75}, 2, True)[0] == "paused"
    assert classify_host({2: 0}, 2, False)[0] == "lost"   # a rank that never started: vanished


# ---- the helper on each host (run here without ssh)
def test_prepare_writes_the_job_folder_0700_and_its_secret_files_0600(tmp_path):
    import base64

    from foundry.backends.compute.ssh import remote

    b64 = base64.b64encode
    out = remote.prepare({"job_dir": str(tmp_path / "jobs" / "j"),
                          "files": {"env.json": [b64(b'{"K": "v"}').decode(), 0o600],
                                    "secrets/foundry/secrets/k/id_key": [b64(KEY).decode(), 0o600]},
                          "lease": {"file": str(tmp_path / "leases.json"), "job_id": "ssh-1", "count": 1, "total": 2}})
    job_dir = Path(out["job_dir"])
    assert out["gpus"] == [0] and (job_dir.stat().st_mode & 0o777) == 0o700
    key = job_dir / "secrets" / "foundry" / "secrets" / "k" / "id_key"
    assert key.read_bytes() == KEY and (key.stat().st_mode & 0o777) == 0o600
    assert (job_dir / "env.json").stat().st_mode & 0o777 == 0o600
    assert remote.read(job_dir / "env.json", 2) == b'K": "v"}' and remote.read(job_dir / "nope", 0) == b""
    assert remote.status(job_dir) == {"exit": None, "alive": False, "ranks": 0, "stop": False}
    assert remote.send(job_dir, "graceful") == {"signalled": []}    # nothing started: nothing signalled
    assert remote.status(job_dir)["stop"] is True


def test_a_stop_reaches_each_rank_exactly_once_whoever_sends_it(tmp_path):
    """The helper at stop and the launcher (for ranks that start after it) both call signal_ranks: the
    training process gets one SIGTERM (a second makes the trainer exit without its checkpoint)."""
    import signal

    from foundry.backends.compute.ssh.remote import signal_ranks
    from foundry.plugins.process_identity import create_time

    received = []
    previous = signal.signal(signal.SIGTERM, lambda *_: received.append(1))
    try:
        (tmp_path / "ranks").mkdir()
        (tmp_path / "ranks" / "rank-0.pid").write_text(f"{os.getpid()} {create_time(os.getpid())}")
        (tmp_path / "ranks" / "rank-1.pid").write_text(f"{os.getpid()} 1.0")   # a reused pid: left alone
        assert signal_ranks(tmp_path, "graceful") == [os.getpid()]
        assert signal_ranks(tmp_path, "graceful") == []
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == [1]


@pytest.mark.parametrize("args, says", [
    (["-o", "hosts=root@10.0.0.1", "-o", "secret=nope"], "no secret named 'nope'"),
    (["-o", "gpus_per_host=1", "-o", "secret=nope"], "needs hosts"),
    (["-o", "hosts=root@a b", "-o", "identity_file=/k"], "is not [user@]address[:port]"),
])
def test_create_cluster_refuses_bad_options_in_one_line_exit_2(cli, args, says):
    code, out, err = cli("create", "cluster", "fleet", "--provider", "ssh", *args)
    assert code == 2 and says in err and "Traceback" not in err
    code, out, err = cli("get", "clusters", "--json")
    assert "fleet" not in out   # nothing was written
