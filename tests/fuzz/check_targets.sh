#!/usr/bin/env bash
# ctest FuzzTools.ListIsEveryTargetAndNothingElse: the fuzz targets as tools/fuzz lists them,
# as tests/fuzz/CMakeLists.txt builds them (its bitsim_fuzzer lines, written by CMake to
# FUZZERS_TXT) and as the sources with an LLVMFuzzerTestOneInput are the same names, and each
# has a checked-in corpus: hand-written seeds and the minimized inputs of a campaign (files
# named by libFuzzer, 40 hex digits; tools/fuzz TARGET --minimize), so that a campaign
# resumes on a new machine (fuzz_systemc.cpp and fuzz_common.h are shared sources, not targets).
#   check_targets.sh SOURCE_DIR FUZZERS_TXT
set -euo pipefail
SRC=$1
CMAKE_LIST=$2
listed=$(python3 "$SRC/tools/fuzz" --list)
sources=$(grep -l 'LLVMFuzzerTestOneInput' "$SRC"/tests/fuzz/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | sort)
fail=0
if ! diff <(echo "$listed") "$CMAKE_LIST"; then
  echo "FAIL: tools/fuzz --list (<) is not the bitsim_fuzzer targets of tests/fuzz/CMakeLists.txt (>)"
  fail=1
fi
if ! diff <(echo "$sources") "$CMAKE_LIST"; then
  echo "FAIL: the sources with an LLVMFuzzerTestOneInput (<) are not the bitsim_fuzzer targets (>)"
  fail=1
fi
# A file named by libFuzzer (40 hex digits) in folder $1. A loop, not `ls | grep -q`: grep
# leaving at its first match kills ls with SIGPIPE, which pipefail takes as the pipe failing.
has_minimized() {
  local f
  for f in "$1"/*; do
    [[ "$(basename "$f")" =~ ^[0-9a-f]{40}$ ]] && return 0
  done
  return 1
}
for t in $listed; do
  if [ -z "$(ls -A "$SRC/tests/fuzz/corpus/$t" 2>/dev/null)" ]; then
    echo "FAIL: $t has no seed corpus in tests/fuzz/corpus/$t"
    fail=1
  elif ! has_minimized "$SRC/tests/fuzz/corpus/$t"; then
    echo "FAIL: $t has no minimized campaign inputs in tests/fuzz/corpus/$t (tools/fuzz $t SECONDS, then tools/fuzz $t --minimize)"
    fail=1
  fi
done
[ $fail = 0 ] && echo "PASS: $(echo "$listed" | wc -l) targets: $(echo $listed)"
exit $fail
