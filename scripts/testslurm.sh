#!/usr/bin/env bash
# A one-node Slurm cluster for the Slurm launcher's tests: munged,
# slurmctld and slurmd (Debian's slurm-wlm and munge) in a network
# namespace of their own, so several clusters can run at once on Slurm's
# default ports. The daemons talk over the namespace's loopback; its only
# other link is a veth pair to this machine's root namespace, with
# 169.254.S.1 (here) and 169.254.S.2 (the node) on it, IPv4 link-local
# addresses that exist only on that pair: a server here is what job
# steps on the node reach, and nothing else is.
#
#   testslurm.sh run DIR    start the cluster (config, key, logs in DIR),
#                           print "ready", hold it until stdin ends or a
#                           signal comes, then stop it
#   testslurm.sh down DIR   stop DIR's cluster and everything it runs
#                           (after a `run` that was killed outright)
#
# Commands reach it inside the namespace with its config:
#   ip netns exec NS env SLURM_CONF=DIR/slurm.conf salloc ... / srun ...
# DIR/slurm.env gives NS, SLURM_CONF, NODE, SERVER_ADDR (this end of the
# pair) and NODE_ADDR for the Go helpers
# (package internal/testhosts). No systemd: the three daemons run in the
# foreground as children of `run`, which ends them by PID (with every
# job step they started) and reaps them. `down` is idempotent, and `run`
# first removes clusters whose DIR is gone (a test binary killed before
# its clean-up), found through /run/rdmaprobe-testslurm.
set -euo pipefail

registry=/run/rdmaprobe-testslurm

die() { echo "testslurm: $*" >&2; exit 1; }

need() {
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || die "$c not found: run scripts/setup.sh (slurm-wlm, munge, iproute2)"
  done
}

# stop_netns NS: end every process in NS (all ours: the daemons and the
# job steps they ran) by PID, TERM first, KILL after 10 s; delete NS.
stop_netns() {
  local ns=$1 pids i
  ip netns list | awk '{print $1}' | grep -qx "$ns" || return 0
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
  for i in $(seq 100); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] && break
    sleep 0.1
  done
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
  ip netns del "$ns"
}

collect_stale() {
  local f d
  for f in "$registry"/*; do
    [ -f "$f" ] || continue
    case "$f" in *.subnet) continue ;; esac
    d=$(cat "$f")
    if [ ! -d "$d" ]; then
      stop_netns "$(basename "$f")"
      rm -f "$f" "$f.subnet"
    fi
  done
}

# sq DIR ARGS...: run a Slurm client command against DIR's cluster.
sq() {
  local dir=$1 ns
  shift
  ns=$(. "$dir/slurm.env"; echo "$NS")
  ip netns exec "$ns" env SLURM_CONF="$dir/slurm.conf" "$@"
}

# pick_subnet prints a third octet in 200-249 nothing here uses (the
# SSH test hosts take 100-199).
pick_subnet() {
  local s
  for s in $(seq 200 249); do
    grep -qx "$s" "$registry"/*.subnet 2>/dev/null && continue
    ip -o -4 addr show | grep -q " 169\.254\.$s\." && continue
    echo "$s"
    return 0
  done
  die "no free 169.254.200-249 subnet"
}

# answers DIR: the cluster's node is up and usable.
answers() {
  [ -f "$1/slurm.env" ] || return 1
  local st
  st=$(sq "$1" sinfo -h -N -o %T 2>/dev/null) || return 1
  [ "$st" = idle ] || [ "$st" = mixed ] || [ "$st" = allocated ]
}

# State of `run`, global because the EXIT trap reads it.
NS="" DIR="" HOLDER=""

# finish stops the daemons and every job step (all in the namespace),
# reaps this script's children and removes the namespace.
finish() {
  [ -n "$HOLDER" ] && kill -TERM "$HOLDER" 2>/dev/null || true
  if [ -n "$NS" ]; then
    stop_netns "$NS"
    rm -f "$registry/$NS" "$registry/$NS.subnet"
  fi
  wait || true
  [ -n "$DIR" ] && rm -f "$DIR/slurm.env"
}

run() {
  local dir ns cpus i s ok=""
  dir=$(realpath -m "$1")
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespace, daemons as root)"
  need ip flock realpath munged slurmctld slurmd srun salloc sinfo
  mkdir -p "$dir" "$registry"
  [ -f "$dir/slurm.env" ] && down "$dir"

  exec 9>"$registry/.lock"
  flock 9
  collect_stale
  ns="rdmaprobe-slurm-$$"
  while [ -e "$registry/$ns" ]; do ns="$ns-x"; done
  s=$(pick_subnet)
  echo "$dir" >"$registry/$ns"
  echo "$s" >"$registry/$ns.subnet"
  flock -u 9
  exec 9>&-
  NS=$ns DIR=$dir
  # From here on, whatever happens, the cluster goes away with us.
  trap finish EXIT
  trap 'exit 143' TERM INT HUP

  ip netns add "$ns"
  ip -n "$ns" link set lo up
  # The pair to this namespace. It also keeps Slurm working at all: Slurm
  # resolves its addresses with AI_ADDRCONFIG, which yields no IPv4
  # address, 127.0.0.1 included, where loopback's is the only one.
  ip link add "rps$s" type veth peer name eth0 netns "$ns"
  sysctl -qw "net.ipv6.conf.rps$s.disable_ipv6=1" 2>/dev/null || true
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
  ip addr add "169.254.$s.1/24" dev "rps$s"
  ip link set "rps$s" up
  ip -n "$ns" addr add "169.254.$s.2/24" dev eth0
  ip -n "$ns" link set eth0 up
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
  chmod 700 "$dir/munge"
  rm -f "$dir/munge/munge.key"
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"

  # slurmctld must run on the host SlurmctldHost names; its address is the
  # namespace's loopback. The node claims 8 CPUs whatever this machine
  # has (config_overrides), so a test can run one task per load generator
  # without oversubscribing flags; the generators are not CPU-bound here.
  cpus=8
  cat >"$dir/slurm.conf" <<EOF
ClusterName=rdmaprobe-test
SlurmctldHost=$(hostname -s)(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
InactiveLimit=0
KillWait=5
NodeName=node1 NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=node1 Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$dir/slurm.env" <<EOF
NS=$ns
SLURM_CONF=$dir/slurm.conf
NODE=node1
CPUS=$cpus
SERVER_ADDR=169.254.$s.1
NODE_ADDR=169.254.$s.2
EOF
  # --force: munged wants the socket's directory open to every user, for
  # clients that are not root; here every client is root and the
  # directory is the test's private one.
  ip netns exec "$ns" munged -F --force --socket="$dir/munge/munge.socket" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" </dev/null &
  for i in $(seq 100); do
    [ -S "$dir/munge/munge.socket" ] && break
    sleep 0.1
  done
  ip netns exec "$ns" slurmctld -D -i -f "$dir/slurm.conf" </dev/null >>"$dir/slurmctld.out" 2>&1 &
  # slurmd insists on a cgroup file system at /sys/fs/cgroup even with
  # plugins that use none (proctrack/linuxproc, task/none), and `ip netns
  # exec` mounts a fresh /sys. In the private mount namespace `ip netns
  # exec` made, a tmpfs holding an empty named cgroup v1 hierarchy of our
  # own reads as cgroup v1; no controller is attached, and nothing
  # outside that namespace sees it.
  ip netns exec "$ns" sh -c 'mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup &&
    mkdir /sys/fs/cgroup/systemd &&
    mount -t cgroup -o none,name=rdmaprobe-test cgroup /sys/fs/cgroup/systemd &&
    exec slurmd -D -f "$1" -N node1' sh "$dir/slurm.conf" </dev/null >>"$dir/slurmd.out" 2>&1 &
  for i in $(seq 300); do
    if answers "$dir"; then ok=1; break; fi
    sleep 0.1
  done
  [ -n "$ok" ] || die "node1 not up after 30 s: $(sq "$dir" sinfo -h -N -o '%T %E' 2>&1); logs in $dir/*.log"
  echo "ready $dir/slurm.env"
  # Hold the cluster until whoever started us closes our stdin or
  # signals (a trap runs during `wait`, not during a foreground command;
  # a background command's stdin is /dev/null unless redirected).
  cat <&3 >/dev/null &
  HOLDER=$!
  wait "$HOLDER" || true
}

down() {
  local dir ns
  dir=$(realpath -m "$1")
  [ -f "$dir/slurm.env" ] || return 0
  ns=$(. "$dir/slurm.env"; echo "$NS")
  [ -n "$ns" ] && stop_netns "$ns"
  rm -f "$registry/$ns" "$registry/$ns.subnet" "$dir/slurm.env"
}

case "${1:-}" in
  run) [ $# -eq 2 ] || die "usage: $0 run DIR"; exec 3<&0; run "$2" ;;
  down) [ $# -eq 2 ] || die "usage: $0 down DIR"; down "$2" ;;
  *) die "usage: $0 run DIR | down DIR" ;;
esac
