#!/usr/bin/env bash
# The headline campaign (benchmarks/headline.py), one setting x arm x seed per process, each
# progress file committed when its run ends: the machines do not outlive a session, and an
# unfinished run needs its weights (in /tmp) to resume, so a session that ends mid-run loses only
# the run under way.
#
#   mkdir -p /tmp/sieve-headline
#   nohup benchmarks/headline_driver.sh > /tmp/sieve-headline/driver.log 2>&1 &
#
# Order: seed-major within a setting (every arm's seed 1, then seed 2, ...; uniform and Sieve
# first in each seed, then Sieve's two-stage variant), warm before cold,
# so a campaign cut short still compares every arm on the same seeds. RUNS overrides it
# ("setting:arm:seed ..."). COMMIT=0 leaves git alone.
#
# CODE=<folder> runs the benchmark from a pinned checkout (e.g. `git worktree add --detach
# /work/campaign <commit>`), so the repository can change under a 50-minute run without a lazy
# import of the running process meeting new code; progress files still land in this repository
# (--results) and are committed here. Each run file records the commit it ran at.
#
# POLICY=tiny runs the tiny headline instead (`--policy tiny`, cold from the bootstrapped tiny
# policy of this repository's data/models/tiny, 5 seeds x every arm, .venv's Python, its log in
# /tmp/sieve-headline/log-tiny.txt); THREADS sets OMP_NUM_THREADS for the runs (the tiny model
# gains little from a second thread, so it can share the machine with the real campaign).
set -u
cd "$(dirname "$0")/.."
MAIN=$(pwd)
CODE=${CODE:-$MAIN}
STATE=/tmp/sieve-headline
NICE=${NICE:-5}
arms="uniform sieve sieve_screen mopps greso dapo"
if [ "${POLICY:-smollm2}" = tiny ]; then
    PY=${PY:-$MAIN/.venv/bin/python}
    RUNS_DIR=benchmarks/results/headline_tiny_runs
    EXTRA=(--policy tiny --model "$MAIN/data/models/tiny")
    LOG=$STATE/log-tiny.txt
    runs=""
    for s in 1 2 3 4 5; do for a in $arms; do runs="$runs cold:$a:$s"; done; done
else
    PY=${PY:-$MAIN/.venv-vllm/bin/python}
    RUNS_DIR=benchmarks/results/headline_runs
    EXTRA=()
    LOG=$STATE/log.txt
    runs=""
    for s in 1 2 3 4; do for a in $arms; do runs="$runs warm:$a:$s"; done; done
    runs="$runs cold:uniform:1 cold:sieve:1 cold:uniform:2 cold:sieve:2"
fi
[ -n "${THREADS:-}" ] && export OMP_NUM_THREADS=$THREADS
bench() {
    (cd "$CODE" && PYTHONPATH="$CODE" "$@" "${EXTRA[@]}" --results "$MAIN/benchmarks/results")
}
RUNS=${RUNS:-$runs}
mkdir -p "$STATE"

commit() {  # commit the given paths alone, retrying while another git command holds the index
    [ "${COMMIT:-1}" = 1 ] || return 0
    local msg=$1; shift
    for _ in $(seq 30); do
        if git add -- "$@" && git commit -q -m "$msg" -- "$@"; then
            return 0
        fi
        sleep 10
    done
    echo "driver: could not commit $*" >&2
}

for run in $RUNS; do
    IFS=: read -r setting arm seed <<< "$run"
    if bench "$PY" benchmarks/headline.py --is-done --setting "$setting" --arms "$arm" \
        --seeds "$seed"; then
        echo "driver: $setting $arm s$seed done before"
        continue
    fi
    echo "driver: $setting $arm s$seed starts $(date -u +%FT%TZ)" \
        "at $(git -C "$CODE" rev-parse --short HEAD)"
    VLLM_LOGGING_LEVEL=WARNING bench nice -n "$NICE" "$PY" benchmarks/headline.py \
        --setting "$setting" --arms "$arm" --seeds "$seed" >> "$LOG" 2>&1
    rc=$?
    echo "driver: $setting $arm s$seed exit $rc $(date -u +%FT%TZ)"
    file="$RUNS_DIR/${setting}_${arm}_s${seed}.json"
    if bench "$PY" benchmarks/headline.py --is-done --setting "$setting" --arms "$arm" \
        --seeds "$seed"; then
        line=$("$PY" -c "import json,sys; p=json.load(open(sys.argv[1])); f=p['final']; \
n=sum(s['update'] for s in p['steps']); r=sum(s['sampled'] for s in p['steps']); \
print(f\"{r} rollouts, {n} updates, greedy {p['curve'][0]['greedy']:.3f} -> {f['greedy']:.3f}, \
sampled {f['sampled']:.3f}, {p['seconds']:.0f} s\")" "$file")
        commit "headline${POLICY:+ ($POLICY)}: $setting $arm seed $seed measured ($line)" "$file" \
            "$RUNS_DIR"/start_*.json
    else
        exit "$rc"
    fi
done
