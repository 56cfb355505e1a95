#!/usr/bin/env bash
# ctest label slurm: a 64-point sweep as a Slurm job array of 8 tasks on a single-node
# cluster on this machine (tools/slurm-local), merged by the dependent merge job, must give
# the rows of the same sweep run locally with --jobs 1, byte for byte except the provenance
# columns. Skips (exit 77) with a message when Slurm or munge is not installed or not root.
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
rm -rf "$WORK"
mkdir -p "$WORK"
export BITSIM_SLURM_DIR="$WORK/cluster" BITSIM_SLURM_PORT=16837
export SLURM_CONF="$BITSIM_SLURM_DIR/etc/slurm.conf"
trap '"$SRC/tools/slurm-local" stop || true' EXIT
"$SRC/tools/slurm-local" start

GRID=(--grid clock_mhz=50,75,100,125,142.86,150,200,250 --grid dma.length_bits=16,18,20,22,23,24,25,26
      --tokens 1 --context 32 --check-model '')
"$BITSIM" sweep "${GRID[@]}" --out "$WORK/c" --slurm-script "$WORK/run.sh" --shards 8 --max-running 2 --quiet
grep -q '^#SBATCH --array=0-7%2$' "$WORK/run.sh"
grep -q '^#SBATCH --mem=[0-9]*M$' "$WORK/run.sh"
grep -q '^#SBATCH --time=[0-9]*$' "$WORK/run.sh"
(cd "$WORK" && bash run.sh) | tee "$WORK/submit.txt"
ARRAY=$(sed -n 's/^array job \([0-9]*\) .*/\1/p' "$WORK/submit.txt")
MERGE=$(sed -n 's/.*merge job \([0-9]*\) .*/\1/p' "$WORK/submit.txt")
[ -n "$ARRAY" ] && [ -n "$MERGE" ]

# Wait for the array and the merge (no time limit here beyond ctest's TIMEOUT).
while [ -n "$(squeue -h -j "$ARRAY,$MERGE" 2>/dev/null)" ]; do sleep 2; done

cat "$WORK/c/logs/merge.out"
grep -q '^complete: all 64 points' "$WORK/c/logs/merge.out"
# Every task ran as its own shard of the array, and no point ran twice.
ran=0
for k in 0 1 2 3 4 5 6 7; do
  line=$(grep "^shard $k/8 (the Slurm array task)" "$WORK/c/logs/shard-$k.out")
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
head -1 "$WORK/c/merged.csv" | grep -q ',bitsim_version,git_commit,config_hash,model_hash,fidelity,host,point_wall_s,peak_rss_mib$'
[ "$(wc -l <"$WORK/c/merged.csv")" = 65 ]
diff <(strip "$WORK/c/merged.csv") <(strip "$WORK/local.csv")
echo "PASS: 64 points in 8 Slurm array tasks merged into the rows of the local --jobs 1 run"
