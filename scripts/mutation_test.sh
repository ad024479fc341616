#!/usr/bin/env bash
# Mutation testing with mutmut: how many small changes to the code (mutants) the tests catch.
#
#   scripts/mutation_test.sh [TARGET ...]        default TARGET: rulka/schedules.py
#   scripts/mutation_test.sh agents memories     a folder: every .py file in it
#
# mutmut is not a dependency of rulka: install it where the tests run (pip install mutmut; 3.x).
# Too slow for CI: run it by hand and quote the last line it prints, with the date.
#
# Each TARGET is a file or a folder of the repository. Its tests are the mirrored test path
# (rulka/schedules.py -> tests/rulka/test_schedules.py; agents -> tests/agents), or TESTS="..."
# to choose them; DESELECT="NODEID ..." leaves tests out (pytest --deselect: a node id or a prefix of
# one, e.g. the minutes-long learning tests when mutating agents/). The run happens in a scratch copy of the working tree (mutmut writes a
# mutants/ folder and a [mutmut] config there), so the repository is left untouched.
# Environment: PYTHON (default: python), TESTS, DESELECT, KEEP=1 keeps the scratch copy, JOBS (default 2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
JOBS="${JOBS:-2}"
if [ "$#" -eq 0 ]; then set -- rulka/schedules.py; fi

if ! "$PYTHON" -c "import mutmut" 2>/dev/null; then
    echo "mutation_test: mutmut is not installed for $PYTHON; install it with: $PYTHON -m pip install mutmut" >&2
    exit 2
fi

tests=()
for target in "$@"; do
    target="${target%/}"
    if [ ! -e "$ROOT/$target" ]; then echo "mutation_test: no file or folder $target" >&2; exit 2; fi
    if [ -d "$ROOT/$target" ]; then
        tests+=("tests/$target")
    else
        tests+=("tests/$(dirname "$target")/test_$(basename "$target")")
    fi
done
if [ -n "${TESTS:-}" ]; then read -r -a tests <<< "$TESTS"; fi
for t in "${tests[@]}"; do
    if [ ! -e "$ROOT/$t" ]; then echo "mutation_test: tests $t not found; give them with TESTS=\"...\"" >&2; exit 2; fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/rulka-mutation.XXXXXX")"
if [ "${KEEP:-0}" != "1" ]; then trap 'rm -rf "$work"' EXIT; fi
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work")

# mutmut copies source_paths into mutants/ and runs the tests against them; the packages the tests
# import (all top-level folders) go with them so that nothing is imported from outside mutants/.
packages=$(cd "$work" && for d in */; do d="${d%/}"; [ -f "$d/__init__.py" ] && echo "$d"; done)
top_levels=$(printf '%s\n' "$@" | sed 's#/.*##' | sort -u)
{
    echo
    echo "[mutmut]"
    echo "source_paths ="
    for p in $top_levels; do echo "    $p"; done
    echo "only_mutate ="
    for target in "$@"; do
        target="${target%/}"
        if [ -d "$ROOT/$target" ]; then echo "    $target/*"; else echo "    $target"; fi
    done
    echo "also_copy ="
    for p in $packages; do echo "    $p"; done
    echo "    setup.cfg"
    echo "pytest_add_cli_args_test_selection ="
    for t in "${tests[@]}"; do echo "    $t"; done
    echo "pytest_add_cli_args ="
    echo "    -p"
    echo "    no:cacheprovider"
    for d in ${DESELECT:-}; do echo "    --deselect"; echo "    $d"; done
} >> "$work/setup.cfg"

echo "mutation_test: mutating $* in $work, tests: ${tests[*]}${DESELECT:+, deselected: $DESELECT}" >&2
cd "$work"
"$PYTHON" -m mutmut run --max-children "$JOBS" > mutmut_run.log 2>&1 || {
    tail -40 mutmut_run.log >&2; echo "mutation_test: mutmut run failed (log above)" >&2; exit 1; }
"$PYTHON" -m mutmut results --all true > mutmut_results.txt 2>&1 || true

# results: one "name: status" line per mutant
"$PYTHON" - "$@" <<'EOF'
import collections, re, sys
statuses = collections.Counter()
survivors = []
for line in open("mutmut_results.txt", encoding="utf-8"):
    m = re.match(r"\s*(\S+): (.+)$", line.rstrip())
    if not m:
        continue
    name, status = m.group(1), m.group(2).strip()
    statuses[status] += 1
    if status == "survived":
        survivors.append(name)
total = sum(statuses.values())
killed = statuses.get("killed", 0)
print("mutants by status:", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
for name in survivors:
    print("  survived:", name)
share = 100.0 * killed / total if total else 0.0
print(f"mutation score for {' '.join(sys.argv[1:])}: {killed}/{total} mutants killed ({share:.1f} %)")
EOF
