#!/usr/bin/env bash
# Installs the Debian packages rdmaprobe needs: `setup.sh` (make run)
# what the default run needs, real RDMA in a Soft-RoCE QEMU guest;
# `setup.sh test` (make test) also what only the test suite and optional
# features use. Idempotent: installs only what is missing. Needs root;
# otherwise prints the command to run.
set -euo pipefail

pkgs=(
  qemu-system-x86      # boots the Soft-RoCE guest (TCG)
  linux-image-amd64    # the guest kernel and rdma_rxe.ko
  rdma-core            # rdma tool config, udev rules
  ibverbs-providers    # librxe provider for the guest
  libibverbs-dev       # cgo headers for the verbs fabric
  iproute2             # `rdma` command (resource counts, reference)
  ibverbs-utils        # ibv_devinfo, ibv_rc_pingpong (reference check)
  perftest             # ib_write_lat (reference check)
  librdmacm-dev        # cgo headers for the rdma_cm load generator (--client-kind rdmacm)
  gcc                  # cgo
  ca-certificates
)
test_pkgs=(
  rdmacm-utils         # rping, ucmatose: third-party rdma_cm servers probed in the suite
  chromium             # renders the HTML report in the test suite (headless)
  openssh-server       # sshd of the SSH launcher's test hosts (scripts/testhosts.sh) and of the second Soft-RoCE guest
  openssh-client       # ssh: the SSH launcher, and the test hosts' readiness check
  slurm-wlm            # slurmctld, slurmd, srun: the Slurm launcher's one-node test cluster (scripts/testslurm.sh)
  munge                # Slurm's authentication, started by scripts/testslurm.sh
  prometheus           # scrapes a run's --metrics-addr in app's TestPrometheusScrapesRun, started by the test on loopback
)
case "${1:-run}" in
  run) ;;
  test) pkgs+=("${test_pkgs[@]}") ;;
  *) echo "usage: $0 [run|test]" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# openssh-server, munge, slurm-wlm and prometheus would start their
# system services when installed (sshd on port 22 of every interface);
# the tests start their own (in network namespaces; Prometheus on
# loopback) and need none of them. A policy-rc.d that refuses (exit 101)
# keeps invoke-rc.d from starting anything during this install; it is
# removed afterwards.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
