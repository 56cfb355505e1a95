#!/usr/bin/env bash
# ctest label slurm: a 64-point sweep as a Slurm job array of 8 tasks on a single-node
# cluster on this machine (tools/slurm-local), merged by the dependent merge job, must give
# the rows of the same sweep run locally with --jobs 1, byte for byte except the provenance
# columns. Skips (exit 77) with a message when Slurm or munge is not installed or not root.
# The cluster's runtime files (its Unix sockets among them) live in a short folder of their
# own under /tmp, whatever the length of WORK_DIR; a job that fails, is cancelled or held
# fails the test at once with the scheduler's reason (tests/slurm/wait_jobs.sh). The campaign
# folder's name holds a space, quotes, a # and Slurm's %: the script must name it for sbatch.
#   slurm_campaign_test.sh BITSIM SOURCE_DIR WORK_DIR
set -euo pipefail
BITSIM=$1
SRC=$2
WORK=$3
for t in slurmctld slurmd munged sbatch squeue; do
  if ! command -v "$t" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$t" ]; then
    echo "SKIP: $t not installed (optional: apt-get install slurmctld slurmd slurm-client munge; docs/campaigns.md)"
    exit 77
  fi
done
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: tools/slurm-local runs the Slurm daemons as root"
  exit 77
fi
# shellcheck source=wait_jobs.sh
. "$SRC/tests/slurm/wait_jobs.sh"
rm -rf "$WORK"
mkdir -p "$WORK"

# Two free ports in a row (another cluster may run on this machine, another worktree's test).
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=""
for _ in $(seq 1 100); do
  p=$((20000 + RANDOM % 20000))
  if ! port_taken "$p" && ! port_taken $((p + 1)); then PORT=$p; break; fi
done
[ -n "$PORT" ] || { echo "FAIL: no two free ports in a row in 20000..40000"; exit 1; }

CLUSTER=$(mktemp -d /tmp/bsl.XXXXXX)
export BITSIM_SLURM_DIR="$CLUSTER" BITSIM_SLURM_PORT=$PORT
export SLURM_CONF="$BITSIM_SLURM_DIR/etc/slurm.conf"
cleanup() {
  "$SRC/tools/slurm-local" stop || true
  cp -r "$CLUSTER/log" "$WORK/cluster-log" 2>/dev/null || true  # kept with the test's files
  rm -rf "$CLUSTER"
}
trap cleanup EXIT
"$SRC/tools/slurm-local" start

# What the scheduler says when a job cannot complete: named at once, with its reason.
fails_at_once() {  # expected reason, sbatch arguments...
  local want=$1 id out t0=$SECONDS
  shift
  id=$(cd "$WORK" && sbatch --parsable "$@")
  id=${id%%;*}
  if out=$(wait_jobs 60 "$id"); then echo "FAIL: job $id ($*) completed"; exit 1; fi
  echo "$out"
  scancel "$id" 2>/dev/null || true
  case "$out" in
    *"$want"*) ;;
    *) echo "FAIL: job $id ($*): the reason is not $want"; exit 1 ;;
  esac
  [ $((SECONDS - t0)) -le 60 ] || { echo "FAIL: job $id ($*) took $((SECONDS - t0)) s to be named"; exit 1; }
}
fails_at_once JobHeldUser --hold --wrap true
fails_at_once NonZeroExitCode --output=/dev/null --wrap false
fails_at_once JobLaunchFailure --output=/nonexistent/x.out --wrap true

GRID=(--grid clock_mhz=50,75,100,125,142.86,150,200,250 --grid dma.length_bits=16,18,20,22,23,24,25,26
      --tokens 1 --context 32 --check-model '')
C="$WORK/c 'q' \"d\" #x %a%%"
"$BITSIM" sweep "${GRID[@]}" --out "$C" --slurm-script "$WORK/run it.sh" --shards 8 --max-running 2 --quiet
grep -q '^#SBATCH --array=0-7%2$' "$WORK/run it.sh"
grep -q '^#SBATCH --mem=[0-9]*M$' "$WORK/run it.sh"
grep -q '^#SBATCH --time=[0-9]*$' "$WORK/run it.sh"
(cd "$WORK" && bash "run it.sh") | tee "$WORK/submit.txt"
ARRAY=$(sed -n 's/^array job \([0-9]*\) .*/\1/p' "$WORK/submit.txt")
MERGE=$(sed -n 's/.*merge job \([0-9]*\) .*/\1/p' "$WORK/submit.txt")
[ -n "$ARRAY" ] && [ -n "$MERGE" ]

# Wait for the array and the merge; a task or the merge that cannot complete fails the test
# at once with the scheduler's reason and the logs.
if ! wait_jobs 1200 "$ARRAY" "$MERGE"; then
  scontrol show job "$ARRAY" || true
  tail -n 20 "$C"/logs/* "$CLUSTER/log/slurmctld.log" "$CLUSTER/log/slurmd.log" || true
  scancel "$ARRAY" "$MERGE" 2>/dev/null || true
  echo "FAIL: the campaign's jobs did not complete"
  exit 1
fi

cat "$C/logs/merge.out"
grep -q '^complete: all 64 points' "$C/logs/merge.out"
# Every task ran as its own shard of the array, and no point ran twice.
ran=0
for k in 0 1 2 3 4 5 6 7; do
  line=$(grep "^shard $k/8 (the Slurm array task)" "$C/logs/shard-$k.out")
  echo "$line"
  n=$(echo "$line" | sed -n 's/.* \([0-9]*\) run, 0 failed.*/\1/p')
  [ -n "$n" ]
  ran=$((ran + n))
done
[ "$ran" = 64 ]

# The same sweep locally, in one process.
"$BITSIM" sweep "${GRID[@]}" --jobs 1 --quiet --csv "$WORK/local.csv" >/dev/null
# Provenance is the last 8 columns; the rest must be equal byte for byte.
strip() { sed -E 's/(,[^,]*){8}$//' "$1"; }
head -1 "$C/merged.csv" | grep -q ',bitsim_version,git_commit,config_hash,model_hash,fidelity,host,point_wall_s,peak_rss_mib$'
[ "$(wc -l <"$C/merged.csv")" = 65 ]
diff <(strip "$C/merged.csv") <(strip "$WORK/local.csv")
echo "PASS: 64 points in 8 Slurm array tasks merged into the rows of the local --jobs 1 run"
