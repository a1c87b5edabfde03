#!/bin/sh
# check_scratch.sh TEST [ARGS...] — runs a test whose scratch folder comes from tu_tmpdir with TMPDIR
# set to a fresh folder of its own, and fails when a passing run leaves anything behind (or did not
# use TMPDIR and say so). A failing run keeps its scratch folder, and the test's last line says where.
# Exit codes pass through (77: skipped).
t=$(mktemp -d "${TMPDIR:-/tmp}/ats_check_scratch_XXXXXX") || exit 1
TMPDIR=$t "$@" 2>"$t.err"
rc=$?
cat "$t.err" >&2
if [ "$rc" -ne 0 ]; then
    rm -f "$t.err"
    rmdir "$t" 2>/dev/null
    exit "$rc"
fi
if ! grep -q "removed its scratch folder $t/" "$t.err"; then
    echo "check_scratch.sh: $1 passed without 'removed its scratch folder $t/...' on stderr (scratch outside TMPDIR?)" >&2
    rc=1
elif [ -n "$(ls -A "$t")" ]; then
    echo "check_scratch.sh: $1 passed and left in $t:" $(ls -A "$t") >&2
    rc=1
fi
rm -f "$t.err"
rmdir "$t" 2>/dev/null # only when empty: what a test left stays for a look
exit "$rc"
