#!/bin/sh
# The mutation gate's registry stays plantable (tools/mutation-gate --check, no build):
#   check_test.sh SOURCE_DIR WORK_DIR shipped   every mutant of tests/mutants/mutants.toml
#                                                 plants on the current tree (exit 0)
#   check_test.sh SOURCE_DIR WORK_DIR stale     a mutant whose text is gone is reported by
#                                                 name and file, exit 1
set -u
gate="$1/tools/mutation-gate"
work="$2"
case "$3" in
  shipped)
    exec "$gate" --check
    ;;
  stale)
    mkdir -p "$work"
    cat > "$work/stale.toml" <<'TOML'
[[mutant]]
name = "planted-nowhere"
what = "a fault whose text no longer occurs in its file"
file = "src/hw/interconnect/hp_port.cpp"
find = "this line was never in the HP port's source"
replace = "nor this one"
targets = ["hp_port_test"]
tests = "^HpPort\\."
expect = [{ test = "HpPort\\..*", message = "Failure" }]
TOML
    out=$("$gate" --check --mutants "$work/stale.toml" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, expected 1"; exit 1; }
    echo "$out" | grep -q "stale mutant planted-nowhere: src/hw/interconnect/hp_port.cpp: the planted text occurs 0 times" ||
      { echo "FAIL: the stale mutant is not named"; exit 1; }
    echo "$out" | grep -q "0 of 1 mutants" || { echo "FAIL: no summary"; exit 1; }
    ;;
  *)
    echo "usage: check_test.sh SOURCE_DIR WORK_DIR shipped|stale" >&2
    exit 2
    ;;
esac
