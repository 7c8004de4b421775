#!/usr/bin/env bash
# Node loss and return, by process id (never by name): every process inside the node's network namespace
# (slurmd, slurmstepd, torchrun, workers) is listed with `ip netns pids` and SIGKILLed.
#   bash node.sh kill NODE [power]   # power: take the node's link down first (peers get no RST)
#   bash node.sh revive NODE         # link up, slurmd back (ReturnToService=2 makes the node usable again)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cmd=${1:?kill|revive}; n=${2:?node number}; ns=$(mn_ns "$n")
case $cmd in
kill)
  [[ ${3:-} == power ]] && ip link set "$(mn_veth "$n")" down
  pids=$(ip netns pids "$ns" | tr '\n' ' ')
  [[ -n ${pids// } ]] && kill -KILL $pids
  rm -f "$MN_ROOT/run/slurmd-$ns.pid"
  echo "$ns: killed ${pids:-nothing}" ;;
revive)
  ip link set "$(mn_veth "$n")" up 2>/dev/null || true
  pf=$MN_ROOT/run/slurmd-$ns.pid
  if ! { [[ -f $pf ]] && kill -0 "$(cat "$pf")" 2>/dev/null; }; then
    mn_exec "$n" slurmd -f "$MN_SLURM_CONF" -N "$ns"
  fi
  echo "$ns: slurmd back" ;;
*) echo "usage: node.sh kill NODE [power] | revive NODE" >&2; exit 2 ;;
esac
