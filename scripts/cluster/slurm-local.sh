#!/bin/bash
# A one-node Slurm on this machine, for trying the recipe (scripts/cluster/slurm.sh) and for its test: Debian's
# slurm-wlm and munge (`apt-get install slurm-wlm munge`), run as root, state and logs under DIR.
#
# usage: bash scripts/cluster/slurm-local.sh up DIR     # starts munged, slurmctld and slurmd; prints SLURM_CONF
#        bash scripts/cluster/slurm-local.sh down DIR   # cancels every job and stops the daemons it started
# Then `export SLURM_CONF=DIR/slurm.conf` and use sbatch, squeue, sinfo as usual.
set -euo pipefail
cmd=${1:?usage: slurm-local.sh up|down DIR}
dir=$(realpath -m "${2:?usage: slurm-local.sh up|down DIR}")
conf="$dir/slurm.conf"

stop() {
  for d in slurmd slurmctld; do
    if [[ -f "$dir/$d.pid" ]]; then
      kill "$(cat "$dir/$d.pid")" 2>/dev/null || true
      rm -f "$dir/$d.pid"
    fi
  done
  if [[ -f "$dir/munged.pid" ]]; then
    kill "$(cat "$dir/munged.pid")" 2>/dev/null || true
    rm -f "$dir/munged.pid"
  fi
}

if [[ $cmd == down ]]; then
  if [[ -f $conf ]]; then SLURM_CONF=$conf scancel --user=root 2>/dev/null || true; fi
  stop
  exit 0
fi
[[ $cmd == up ]] || { echo "usage: slurm-local.sh up|down DIR" >&2; exit 2; }
for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || { echo "no $tool: apt-get install slurm-wlm munge" >&2; exit 2; }
done
[[ $(id -u) == 0 ]] || { echo "slurm-local.sh runs the daemons as root" >&2; exit 2; }

mkdir -p "$dir/state" "$dir/slurmd" "$dir/munge"
chown munge:munge "$dir/munge"
# munged as its own user, with its socket and pid under DIR (so it never meets a system munged).
runuser -u munge -- munged --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
cp "$dir/munge/munged.pid" "$dir/munged.pid"

host=$(hostname -s)
mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512))
cat > "$conf" <<EOF
ClusterName=phantom
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SlurmUser=root
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmdSpoolDir=$dir/slurmd
StateSaveLocation=$dir/state
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$conf
slurmctld -f "$conf"
slurmd -f "$conf"
for _ in $(seq 1 60); do
  if sinfo -h -o %T 2>/dev/null | grep -q idle; then
    echo "SLURM_CONF=$conf"
    exit 0
  fi
  sleep 0.5
done
echo "the node did not come up idle in 30 s; see $dir/slurmctld.log and $dir/slurmd.log" >&2
stop
exit 1
