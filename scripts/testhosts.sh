#!/usr/bin/env bash
# Client hosts for the SSH launcher's tests: N network namespaces on one
# bridge, each running its own sshd, reachable only from this machine.
#
#   testhosts.sh run DIR N  create hosts h1..hN (state and keys in DIR),
#                           print "ready", hold them until stdin ends or
#                           a signal comes, then remove them
#   testhosts.sh down DIR   remove DIR's hosts and end what runs in them
#                           (after a `run` that was killed outright)
#
# Addresses are 169.254.S.0/24 (IPv4 link-local) on a bridge that has no
# other port and no route anywhere else: 169.254.S.1 is this machine's
# side, 169.254.S.(10+i) is host hi. IP forwarding is left as it is (off
# on a stock machine), so nothing here can reach or be reached from off
# the host. S is picked free under a lock, so several test binaries can
# hold sets at once.
#
# Each host has a generated host key, and one generated client key is
# authorised on all; DIR/ssh_config (for `ssh -F`) pins them with
# DIR/known_hosts and BatchMode, so the user's own ~/.ssh is neither read
# nor written. DIR/hosts.env says what was made, for the Go helpers
# (package internal/testhosts); DIR/hostfile lists the hosts with slots.
#
# Each sshd runs in the foreground as a child of `run`, which ends and
# reaps it. `down` is idempotent, and `run` first removes sets whose DIR
# is gone (a test binary killed before its clean-up), found through
# /run/rdmaprobe-testhosts.
set -euo pipefail

registry=/run/rdmaprobe-testhosts

die() { echo "testhosts: $*" >&2; exit 1; }

need() {
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || die "$c not found: run scripts/setup.sh (openssh-server, openssh-client, iproute2)"
  done
}

# stop_netns NS: end every process in NS (all ours: an sshd and what its
# sessions ran) by PID, TERM first, KILL after 5 s; then delete NS.
stop_netns() {
  local ns=$1 pids i
  ip netns list | awk '{print $1}' | grep -qx "$ns" || return 0
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
  for i in $(seq 50); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] && break
    sleep 0.1
  done
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
  ip netns del "$ns"
}

# teardown S: remove set S (its namespaces, bridge and registry entry).
teardown() {
  local s=$1 ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^rdmaprobe-$s-h[0-9]+$" || true); do
    stop_netns "$ns"
  done
  ip link del "rpbr$s" 2>/dev/null || true
  rm -f "$registry/$s"
}

# collect_stale removes sets whose DIR no longer exists.
collect_stale() {
  local f d
  for f in "$registry"/*; do
    [ -f "$f" ] || continue
    d=$(cat "$f")
    [ -d "$d" ] || teardown "$(basename "$f")"
  done
}

# pick_subnet prints a third octet no other set (or anything else on this
# machine) uses.
pick_subnet() {
  local s
  for s in $(seq 100 199); do
    [ -e "$registry/$s" ] && continue
    ip link show "rpbr$s" >/dev/null 2>&1 && continue
    ip -o -4 addr show | grep -q " 169\.254\.$s\." && continue
    echo "$s"
    return 0
  done
  die "no free 169.254.100-199 subnet"
}

# ssh_all DIR [verbose]: every host of DIR answers a login. The logins
# run at once: on a busy machine each takes seconds.
ssh_all() {
  local dir=$1 h hosts p pids=() rc=0
  hosts=$(. "$dir/hosts.env"; echo "$HOSTS")
  for h in $hosts; do
    if [ "${2:-}" = verbose ]; then
      ssh -F "$dir/ssh_config" "$h" true &
    else
      ssh -F "$dir/ssh_config" "$h" true 2>/dev/null &
    fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

# State of `run`, global because the EXIT trap reads it.
SET="" DIR="" PIDS=() HOLDER=""

# finish ends what `run` started: its sshds (and everything else in the
# namespaces), then the namespaces and bridge; it reaps its children.
finish() {
  local p
  for p in "${PIDS[@]}" $HOLDER; do kill -TERM "$p" 2>/dev/null || true; done
  [ -n "$SET" ] && teardown "$SET"
  wait || true
  [ -n "$DIR" ] && rm -f "$DIR/hosts.env"
}

run() {
  local n s i ns addr hosts="" names=""
  DIR=$(realpath -m "$1")
  local dir=$DIR
  n=$2
  [[ $n =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 50 ] || die "host count must be 1..50, got $n"
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
  need ip ssh ssh-keygen flock realpath
  [ -x /usr/sbin/sshd ] || die "/usr/sbin/sshd not found: run scripts/setup.sh (openssh-server)"
  mkdir -p "$dir" "$registry"
  [ -f "$dir/hosts.env" ] && down "$dir"

  exec 9>"$registry/.lock"
  flock 9
  collect_stale
  s=$(pick_subnet)
  echo "$dir" >"$registry/$s"
  SET=$s
  flock -u 9
  exec 9>&-
  # From here on, whatever happens, the set goes away with this process.
  trap finish EXIT
  trap 'exit 143' TERM INT HUP

  local br="rpbr$s"
  ip link add "$br" type bridge
  sysctl -qw "net.ipv6.conf.$br.disable_ipv6=1" 2>/dev/null || true
  ip addr add "169.254.$s.1/24" dev "$br"
  ip link set "$br" up

  ssh-keygen -q -t ed25519 -N '' -C rdmaprobe-test-client -f "$dir/id_ed25519" <<<y >/dev/null
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  : >"$dir/known_hosts"
  : >"$dir/hostfile"
  # sshd's privilege separation directory (Debian's unit creates it).
  mkdir -p /run/sshd
  chmod 755 /run/sshd

  for i in $(seq "$n"); do
    ns="rdmaprobe-$s-h$i"
    addr="169.254.$s.$((10 + i))"
    ip netns add "$ns"
    ip link add "rp$s-$i" type veth peer name eth0 netns "$ns"
    sysctl -qw "net.ipv6.conf.rp$s-$i.disable_ipv6=1" 2>/dev/null || true
    ip link set "rp$s-$i" master "$br" up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up

    mkdir -p "$dir/h$i"
    ssh-keygen -q -t ed25519 -N '' -C "rdmaprobe-test-h$i" -f "$dir/h$i/ssh_host_ed25519_key" <<<y >/dev/null
    echo "$addr $(cut -d' ' -f1,2 "$dir/h$i/ssh_host_ed25519_key.pub")" >>"$dir/known_hosts"
    cat >"$dir/h$i/sshd_config" <<EOF
ListenAddress $addr
Port 22
HostKey $dir/h$i/ssh_host_ed25519_key
PidFile none
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The keys live in a test's temporary directory, not under ~/.ssh.
StrictModes no
PrintMotd no
# A launcher opens one connection per generator, several at once.
MaxStartups 100
MaxSessions 100
# A session whose client went silent (a dropped link) ends within 6 s,
# and with it the stdin of what it ran.
ClientAliveInterval 2
ClientAliveCountMax 3
# A login here does not read this machine's shell startup files (root's
# ~/.bashrc belongs to the machine, not to these hosts): Debian's bash
# reads ~/.bashrc for a command sshd runs unless SHLVL says it is nested,
# and a bashrc that starts pyenv took 2 s of every login.
SetEnv SHLVL=1
EOF
    ip netns exec "$ns" /usr/sbin/sshd -D -f "$dir/h$i/sshd_config" -E "$dir/h$i/sshd.log" </dev/null &
    PIDS+=($!)
    hosts+="$addr "
    names+="h$i "
    echo "h$i slots=2" >>"$dir/hostfile"
  done

  {
    for i in $(seq "$n"); do
      printf 'Host h%d\n  HostName 169.254.%d.%d\n' "$i" "$s" "$((10 + i))"
    done
    cat <<EOF
Host *
  User root
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5
  ServerAliveInterval 2
  ServerAliveCountMax 3
  ControlMaster no
  LogLevel ERROR
  # The default post-quantum exchange (sntrup761) costs 0.7 s per login
  # on a 2-core test machine; these throwaway keys need no more than this.
  KexAlgorithms curve25519-sha256
EOF
  } >"$dir/ssh_config"

  cat >"$dir/hosts.env" <<EOF
SUBNET=$s
SERVER_ADDR=169.254.$s.1
HOSTS="${names% }"
ADDRS="${hosts% }"
SSHD_PIDS="${PIDS[*]}"
EOF
  # Ready means a real login works on every host: sshd listens a moment
  # after it starts.
  local ok=""
  for i in $(seq 100); do
    if ssh_all "$dir"; then ok=1; break; fi
    sleep 0.1
  done
  [ -n "$ok" ] || ssh_all "$dir" verbose || die "sshd did not answer on every host; logs in $dir/h*/sshd.log"
  echo "ready $dir/hosts.env"
  # Hold the hosts until whoever started us closes our stdin or signals
  # (a trap runs during `wait`, not during a foreground command).
  # (A background command's stdin is /dev/null unless redirected.)
  cat <&3 >/dev/null &
  HOLDER=$!
  wait "$HOLDER" || true
}

down() {
  local dir s
  dir=$(realpath -m "$1")
  [ -f "$dir/hosts.env" ] || return 0
  s=$(. "$dir/hosts.env"; echo "$SUBNET")
  [ -n "$s" ] && teardown "$s"
  rm -f "$dir/hosts.env"
}

case "${1:-}" in
  run) [ $# -eq 3 ] || die "usage: $0 run DIR N"; exec 3<&0; run "$2" "$3" ;;
  down) [ $# -eq 2 ] || die "usage: $0 down DIR"; down "$2" ;;
  *) die "usage: $0 run DIR N | down DIR" ;;
esac
