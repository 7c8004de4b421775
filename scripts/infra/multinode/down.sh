#!/usr/bin/env bash
# Tear down what up.sh created: Slurm daemons, munged, S3 server/forwarder (by their pid files), every
# process still inside our namespaces (by pid, from `ip netns pids`), the namespaces, veths, bridge,
# UTS handles and /etc/netns/NAME. WIPE=1 also deletes $MN_ROOT (logs, caches, S3 data).
# Only names from lib.sh are touched; safe to run twice.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
# nodes: whatever up.sh may have made, even if MN_NODES was larger then
nodes=$(seq 1 "${MN_MAX_NODES:-9}")

for i in $nodes; do mn_stop_pidfile slurmd "$MN_ROOT/run/slurmd-$(mn_ns "$i").pid" slurmd; done
mn_stop_pidfile slurmctld "$MN_ROOT/run/slurmctld.pid" slurmctld
mn_stop_pidfile munged "$MN_MUNGE_DIR/munged.pid" munged
[[ $MN_MUNGE_DIR == "$MN_RUN"/* ]] && rm -rf "$MN_MUNGE_DIR"      # key + socket kept outside $MN_ROOT
for i in $nodes; do mn_stop_pidfile sshd "$MN_ROOT/run/sshd-$(mn_ns "$i").pid" sshd; done
mn_stop_pidfile weed "$MN_ROOT/s3/weed.pid" weed
mn_stop_pidfile socat "$MN_ROOT/run/s3-forward.pid" socat

for i in $nodes; do
  ns=$(mn_ns "$i")
  mn_stop_pidfile linkwire "$MN_ROOT/run/wire-$ns.pid" linkwire; rm -f "$MN_ROOT/run/wire-$ns.delay"
  ip link show "$MN_TAP_PREFIX$i" >/dev/null 2>&1 && ip link delete "$MN_TAP_PREFIX$i"     # wan.sh's host-side tap
  if ip netns list | grep -qw "^$ns"; then
    # leftovers (job steps, torchrun, loaders) live in the namespace: list them, TERM then KILL, by pid
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    if [[ -n ${pids// } ]]; then
      echo "$ns: stopping leftover pids $pids"
      kill -TERM $pids 2>/dev/null; sleep 1
      pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
      [[ -n ${pids// } ]] && kill -KILL $pids 2>/dev/null
    fi
    ip netns delete "$ns" && echo "deleted netns $ns"      # also removes its eth0 and our veth peer
  fi
  ip link show "$(mn_veth "$i")" >/dev/null 2>&1 && { ip link delete "$(mn_veth "$i")" 2>/dev/null || true; }  # may vanish with its netns
  uts=$MN_RUN/uts/$ns
  if findmnt -rn "$uts" >/dev/null 2>&1; then umount "$uts"; fi
  rm -f "$uts"
done
rmdir "$MN_RUN/uts" "$MN_RUN" 2>/dev/null || true
# /run/netns: only if up.sh saw it appear and no namespace (ours or anyone's) is left in it
if [[ -f $MN_ROOT/run/created-run-netns ]] && [[ -z $(ls -A /run/netns 2>/dev/null) ]]; then
  findmnt -rn /run/netns >/dev/null 2>&1 && umount /run/netns
  rmdir /run/netns 2>/dev/null; rm -f "$MN_ROOT/run/created-run-netns"
fi
if ip link show "$MN_BRIDGE" >/dev/null 2>&1; then ip link delete "$MN_BRIDGE" type bridge && echo "deleted bridge $MN_BRIDGE"; fi
[[ ${WIPE:-0} == 1 ]] && rm -rf "$MN_ROOT" && echo "wiped $MN_ROOT"
echo "down"
