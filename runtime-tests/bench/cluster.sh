#!/usr/bin/env bash
# The cluster path against one machine: the example corpus made by `reproduce run --jobs 2`
# and by `plan` → a local one-node Slurm (2 tasks at a time on this 2-core machine) →
# `merge`, side by side in one call; then the merge rate of a 25,000-run study (merge.sh).
#   runtime-tests/bench/cluster.sh [ROUNDS]      (default 2; as root; not part of the tests)
# Prints the overhead ratio of the cluster path (target ≤ 1.2× for runs of ≥ 1 s each) and
# the merge rate in results per second (target ≥ 5,000/s).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rounds=${1:-2}
need slurmctld slurmd sbatch squeue munged munge runuser python3 git
[ "$(id -u)" = 0 ] || { echo "cluster.sh: run as root (slurmd)" >&2; exit 1; }
build_reprorun
make_work

REPRORUN=$bin "$root/images/corpus/build.sh" "$work/corpus" >/dev/null
cd "$work"
inputs=(--instances corpus/instances.jsonl --predictions corpus/predictions.jsonl)
study=("${inputs[@]}" --k 2 --compare-shim --pin-runs 0)

# A one-node Slurm in $work/slurm; stopped on exit.
s=$work/slurm
mkdir -p "$s/munge" "$s/ctld" "$s/d"
chmod 755 "$work" "$s"
chown munge: "$s/munge"
timeout 20 runuser -u munge -- munged -S "$s/munge/munge.sock" --pid-file="$s/munge/munged.pid" \
  --log-file="$s/munge/munged.log" --seed-file="$s/munge/munged.seed"
port=$((20000 + ($$ % 20000) * 2))
cat >"$s/slurm.conf" <<EOF
ClusterName=bench
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$s/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$s/ctld
SlurmdSpoolDir=$s/d
SlurmctldPidFile=$s/ctld.pid
SlurmdPidFile=$s/d.pid
SlurmctldLogFile=$s/ctld.log
SlurmdLogFile=$s/d.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeHostname=$(hostname) CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$s/slurm.conf
stop_slurm() {
  for p in "$s/d.pid" "$s/ctld.pid" "$s/munge/munged.pid"; do
    [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true
  done
  sleep 1
  rm -rf "$work"
}
trap stop_slurm EXIT
timeout 20 slurmctld -f "$SLURM_CONF"
timeout 20 slurmd -f "$SLURM_CONF" -N localhost
for _ in $(seq 100); do
  [ "$(timeout 5 sinfo -h -o %t 2>/dev/null)" = idle ] && break
  sleep 0.2
done
[ "$(timeout 5 sinfo -h -o %t)" = idle ] || { echo "cluster.sh: slurm did not come up" >&2; exit 1; }

now() { date +%s.%N; }

# The scripts Slurm runs start $REPRORUN: this wrapper notes when each `work` and `merge`
# starts and ends (in $work/stamps), so that the cluster path's time splits into its phases.
cat >"$work/stamp" <<EOF
#!/bin/sh
echo "\$2-start \$(date +%s.%N)" >>"$work/stamps"
"$bin" "\$@"; rc=\$?
echo "\$2-end \$(date +%s.%N)" >>"$work/stamps"
exit \$rc
EOF
chmod 755 "$work/stamp"

# Slurm's own floor: an empty job's round trip (`sbatch --wait`), median of 3, seconds.
slurm_floor() {
  local i t0
  for i in 1 2 3; do
    t0=$(now)
    timeout 60 sbatch --quiet --wait --output=/dev/null --wrap=true >/dev/null
    echo "$(now) - $t0" | bc
  done | sort -n | sed -n 2p
}

# local_run N: `run --jobs 2` into a fresh database; prints seconds.
local_run() {
  local t0; t0=$(now)
  "$bin" reproduce run "${study[@]}" --db "local$1.db" --jobs 2 >/dev/null 2>&1
  echo "$(now) - $t0" | bc
}

# slurm_run NAME [PLAN-ARGS...]: plan, submit.sh, wait for the merge job; prints seconds,
# and adds its phases to phases.txt.
slurm_run() {
  local t0 t1 t2 t3 merge_job n=$1; shift; t0=$(now)
  : >"$work/stamps"
  "$bin" reproduce plan "${study[@]}" --db "cluster$n.db" --out "tasks$n" \
    --results "results$n" "$@" >/dev/null
  t1=$(now)
  merge_job=$(REPRORUN=$work/stamp timeout 60 "tasks$n/submit.sh" 2>/dev/null | tail -n 1)
  t2=$(now)
  while [ -n "$(timeout 10 squeue -h -j "$merge_job" 2>/dev/null)" ]; do sleep 0.1; done
  [ -f "cluster$n.db" ] || { echo "cluster.sh: the merge job wrote no database" >&2; exit 1; }
  t3=$(now)
  python3 "$root/runtime-tests/bench/cluster-phases.py" "$n" "$t0" "$t1" "$t2" "$t3" \
    "$work/stamps" >>phases.txt
  echo "$t3 - $t0" | bc
}

runs=$(( $(wc -l <corpus/instances.jsonl) * 4 ))
# Default chunks (one run per array task here), and chunks of a quarter of the runs (four
# array tasks: each pays the scheduler's per-task cost once for several runs).
quarter=$(( (runs + 3) / 4 ))
# And the whole study as one array task given the node's CPUs: `work` makes its runs
# $SLURM_CPUS_PER_TASK at a time (one array task per node).
cpus=$(nproc)
printf '%-6s %10s %12s %8s %14s %8s %14s %8s\n' round run_s slurm_s ratio "slurm_chunk${quarter}_s" ratio "one_task_j${cpus}_s" ratio
ratios=(); ratios_c=(); ratios_j=(); locals=()
for r in $(seq "$rounds"); do
  a=$(local_run "$r"); locals+=("$a")
  b=$(slurm_run "$r")
  c=$(slurm_run "c$r" --chunk "$quarter")
  j=$(slurm_run "j$r" --chunk "$runs" --sbatch-args "--cpus-per-task=$cpus")
  ratio=$(echo "scale=3; $b / $a" | bc); ratios+=("$ratio")
  ratio_c=$(echo "scale=3; $c / $a" | bc); ratios_c+=("$ratio_c")
  ratio_j=$(echo "scale=3; $j / $a" | bc); ratios_j+=("$ratio_j")
  printf '%-6s %10.2f %12.2f %7.2fx %14.2f %7.2fx %14.2f %7.2fx\n' "$r" "$a" "$b" "$ratio" "$c" "$ratio_c" "$j" "$ratio_j"
done
floor=$(printf %.2f "$(slurm_floor)")
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "cluster path / run --jobs 2, $runs runs, median of $rounds round(s) (target <= 1.2x):"
echo "  one run per array task:   $(median "${ratios[@]}")x"
echo "  $quarter runs per array task: $(median "${ratios_c[@]}")x"
echo "  one array task, work --jobs $cpus: $(median "${ratios_j[@]}")x"
local_s=$(median "${locals[@]}")
echo "Slurm's floor, an empty job's round trip (sbatch --wait, median of 3): $floor s;"
echo "  run --jobs 2 + that floor would be $(echo "scale=2; ($local_s + $floor) / $local_s" | bc)x"
echo "Phases, seconds (plan; submit.sh; from submitted to the first work's start; first work's"
echo "start to last work's end; to the merge's start; merge; to squeue showing it gone; all):"
printf '%-6s%7s%9s%13s%8s%10s%8s%9s%8s\n' run plan submit to_work work to_merge merge to_seen all
cat phases.txt
# The two paths must agree.
"$bin" reproduce report --db local1.db --out rep-local --json >local.json
"$bin" reproduce report --db cluster1.db --out rep-cluster --json >cluster.json
"$bin" reproduce report --db clusterj1.db --out rep-j --json >clusterj.json
python3 - <<'EOF'
import json
a, b = json.load(open("local.json")), json.load(open("cluster.json"))
j = json.load(open("clusterj.json"))
for arm in ("shim", "no_shim"):
    assert a[arm] == b[arm], (arm, a[arm], b[arm])
    assert a[arm] == j[arm], (arm, a[arm], j[arm])
print("classes and counts: the same on both paths")
EOF

# The merge rate, on this corpus's plan: runtime-tests/bench/merge.sh.
"$root/runtime-tests/bench/merge.sh" 25000
