# shellcheck shell=bash
# The case counter the stubbed-command tests share (scripts/tests/host.sh and runsc.sh, and
# .github/scripts/tests through harness.sh). Sourced, never executed.
#   check NAME COMMAND...   runs COMMAND and prints one line for the case, ok or FAIL
#   check_summary           prints "N passed, N failed" (the line the test runners' logs are
#                           read for); false when any case failed, so it ends a test script
passed=0
failed=0
check() {
  local name="$1"; shift
  if "$@"; then
    echo "ok    ${name}"
    passed=$((passed + 1))
  else
    echo "FAIL  ${name}"
    failed=$((failed + 1))
  fi
}

check_summary() {
  echo "${passed} passed, ${failed} failed"
  ((failed == 0))
}
