#!/usr/bin/env bash
# One-node Slurm cluster for the tests: munged + slurmctld + slurmd, state and spool under one folder.
#   bash tests/infra/slurm.sh install   apt-get install the Debian packages (root; also iproute2 for the netns tests)
#   bash tests/infra/slurm.sh start     write slurm.conf, start the daemons, wait until the node is idle
#   bash tests/infra/slurm.sh stop      stop the daemons this script started, remove the folder
#   bash tests/infra/slurm.sh env       print `export SLURM_CONF=...` for clients
# Folder: $DISTDOCTOR_SLURM_DIR (default /tmp/distdoctor-slurm). Needs root (SlurmUser=root).
set -euo pipefail
DIR=${DISTDOCTOR_SLURM_DIR:-/tmp/distdoctor-slurm}
HOST=$(hostname -s)
CPUS=${DISTDOCTOR_SLURM_CPUS:-2}
die() { echo "slurm.sh: $*" >&2; exit 1; }

install() {
  [ "$(id -u)" = 0 ] || die "install needs root"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq slurmctld slurmd slurm-client munge iproute2 >/dev/null
}

start_munge() {
  if [ -S /run/munge/munge.socket.2 ] && munge -n </dev/null >/dev/null 2>&1; then return; fi
  mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
  chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key; chmod 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  echo munged > "$DIR/started_munge"
  for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && return; sleep 0.1; done
  die "munged did not start"
}

start() {
  [ "$(id -u)" = 0 ] || die "start needs root"
  command -v slurmctld >/dev/null || die "slurmctld not installed (bash $0 install)"
  mkdir -p "$DIR"/{state,spool,log}
  cat > "$DIR/slurm.conf" <<CONF
ClusterName=distdoctor
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=${DISTDOCTOR_SLURMCTLD_PORT:-6817}
SlurmdPort=${DISTDOCTOR_SLURMD_PORT:-6818}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=2
InactiveLimit=0
MinJobAge=30
NodeName=$HOST CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=10 State=UP
CONF
  start_munge
  export SLURM_CONF="$DIR/slurm.conf"
  /usr/sbin/slurmctld -f "$SLURM_CONF"
  /usr/sbin/slurmd -f "$SLURM_CONF"
  for _ in $(seq 100); do
    if sinfo -h -o %t 2>/dev/null | grep -qx 'idle'; then echo "slurm.sh: node $HOST idle ($SLURM_CONF)" >&2; return; fi
    sleep 0.2
  done
  tail -5 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
  die "node $HOST did not become idle in 20 s"
}

stop_pidfile() {
  local f=$1
  [ -s "$f" ] || return 0
  local pid; pid=$(cat "$f")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

stop() {
  [ -d "$DIR" ] || return 0
  export SLURM_CONF="$DIR/slurm.conf"
  scancel --user=root >/dev/null 2>&1 || true
  # signal both daemons first, then wait: stopping them one after the other doubles the wait
  local f
  for f in "$DIR/slurmd.pid" "$DIR/slurmctld.pid"; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  stop_pidfile "$DIR/slurmd.pid"
  stop_pidfile "$DIR/slurmctld.pid"
  if [ -f "$DIR/started_munge" ] && [ -s /run/munge/munged.pid ]; then stop_pidfile /run/munge/munged.pid; fi
  rm -rf "$DIR"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$DIR/slurm.conf" ;;
  *) echo "usage: bash $0 install|start|stop|env" >&2; exit 2 ;;
esac
