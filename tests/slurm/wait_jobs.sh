# Sourced by the slurm tests (bash). Needs SLURM_CONF for the cluster's clients.
#
# wait_jobs LIMIT_S JOBID...
#   Waits until every job (every task of an array) has COMPLETED. Returns 1 at once, naming
#   the job, its state and the scheduler's reason, when one has failed, was cancelled, timed
#   out, or is held or pending for a reason that does not pass by itself ("launch failed
#   requeued held", JobHeldUser, DependencyNeverSatisfied, ...); returns 1 after LIMIT_S
#   seconds with the jobs' states. Polls every 2 s.

# Reasons a pending job waits on that pass by themselves.
wait_jobs_benign_reason() {
  case "$1" in
    None|Priority|Resources|Dependency|JobArrayTaskLimit|BeginTime|Prolog|"") return 0 ;;
    *) return 1 ;;
  esac
}

wait_jobs() {
  local limit=$1
  shift
  local ids
  ids=$(IFS=,; echo "$*")
  local start=$SECONDS out id state reason bad busy
  while :; do
    if ! out=$(squeue -h -r -t all -j "$ids" -o '%i|%T|%r' 2>&1); then
      echo "wait_jobs: squeue -j $ids failed: $out"
      return 1
    fi
    bad=""
    busy=0
    while IFS='|' read -r id state reason; do
      [ -n "$id" ] || continue
      case "$state" in
        COMPLETED) ;;
        PENDING)
          busy=1
          wait_jobs_benign_reason "$reason" || bad="$bad  job $id $state, reason: $reason"$'\n'
          ;;
        RUNNING|CONFIGURING|COMPLETING|STAGE_OUT|RESIZING|REQUEUED|SIGNALING) busy=1 ;;
        *) bad="$bad  job $id $state, reason: $reason"$'\n' ;;
      esac
    done <<<"$out"
    if [ -n "$bad" ]; then
      printf 'wait_jobs: a job will not complete (after %d s):\n%s' $((SECONDS - start)) "$bad"
      return 1
    fi
    if [ $busy = 0 ]; then
      if [ -z "$out" ]; then
        echo "wait_jobs: the scheduler knows none of the jobs $ids"
        return 1
      fi
      return 0
    fi
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      printf 'wait_jobs: the jobs did not finish within %d s:\n%s\n' "$limit" "$out"
      return 1
    fi
    sleep 2
  done
}
