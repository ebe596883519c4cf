# The CLI tests' shared harness (sourced by test_cli.sh and test_cli_data_bin.sh):
# a scratch directory $work removed on exit, the counters, fail, and
# expect_fail, the check that an error is one line on stderr with the wanted
# exit status.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
checks=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_fail EXIT_CODE 'message fragment' cmd...
expect_fail() {
    local want="$1" frag="$2"
    shift 2
    checks=$((checks + 1))
    "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$work/err")
    if [ "$rc" != "$want" ]; then fail "$* -> exit $rc, wanted $want ($(cat "$work/err"))"; return; fi
    if ! grep -qF -- "$frag" "$work/err"; then fail "$*: stderr '$(cat "$work/err")' lacks '$frag'"; return; fi
    if [ "$lines" != 1 ]; then fail "$*: $lines lines on stderr, wanted one"; fi
}
