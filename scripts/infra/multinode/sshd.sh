#!/usr/bin/env bash
# One OpenSSH server per node (Debian openssh-server), for the `ssh` compute provider's tests:
#   bash sshd.sh start     # sshd inside each node's namespaces, listening on the node's address:22
#   bash sshd.sh stop      # by pid file (cmdline checked)
# Each node has its own host key ($MN_ROOT/NODE/ssh/), so pinning a host's key means something; logins
# are key-only (root allowed, keys from $MN_SSH_AUTHORIZED_KEYS). Sessions run in the node's network,
# UTS and mount namespaces (mn_exec), so `hostname` and /etc/hosts are the node's. node.sh kill stops
# a node's sshd with everything else in it. MN_SSH_ANY_ADDRESS=1: listen on every address of the node's
# namespace (tests that add an address to a node later: an emulated cloud instance's, tests/support/ec2_nodes.py).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cmd=${1:?start|stop}
case $cmd in
start)
  [[ -n $MN_SSH_AUTHORIZED_KEYS && -f $MN_SSH_AUTHORIZED_KEYS ]] || {
    echo "sshd.sh: set MN_SSH_AUTHORIZED_KEYS to a file of public keys allowed to log in" >&2; exit 1; }
  if [[ ! -x /usr/sbin/sshd ]]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends openssh-server >/dev/null
  fi
  mkdir -p /run/sshd && chmod 0755 /run/sshd     # sshd's privilege-separation folder (a system folder: kept)
  for i in $(mn_nodes); do
    ns=$(mn_ns "$i"); d=$MN_ROOT/$ns/ssh; pf=$MN_ROOT/run/sshd-$ns.pid
    mkdir -p "$d"; chmod 0700 "$d"
    [[ -s $d/host_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C "$ns" -f "$d/host_ed25519"
    cat >"$d/sshd_config" <<CONF
ListenAddress $([[ ${MN_SSH_ANY_ADDRESS:-0} == 1 ]] && echo 0.0.0.0 || mn_ip "$i")
Port 22
HostKey $d/host_ed25519
PidFile $pf
AuthorizedKeysFile $MN_SSH_AUTHORIZED_KEYS
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
PrintMotd no
MaxStartups 100:30:200
MaxSessions 50
CONF
    if [[ -f $pf ]] && kill -0 "$(cat "$pf")" 2>/dev/null; then continue; fi
    mn_exec "$i" /usr/sbin/sshd -f "$d/sshd_config" -E "$MN_ROOT/log/sshd-$ns.log"
  done
  for i in $(mn_nodes); do        # ready when each node's port answers
    for _ in $(seq 1 50); do
      (exec 3<>"/dev/tcp/$(mn_ip "$i")/22") 2>/dev/null && break; sleep 0.1
    done
  done
  echo "sshd up on $(mn_nodes | tr '\n' ' ')" ;;
stop)
  for i in $(seq 1 "${MN_MAX_NODES:-9}"); do mn_stop_pidfile sshd "$MN_ROOT/run/sshd-$(mn_ns "$i").pid" sshd; done ;;
*) echo "usage: sshd.sh start|stop" >&2; exit 2 ;;
esac
