#!/usr/bin/env bash
# The headline campaign (benchmarks/headline.py), one setting x arm x seed per process, each
# progress file committed when its run ends: the machines do not outlive a session, and an
# unfinished run needs its weights (in /tmp) to resume, so a session that ends mid-run loses only
# the run under way.
#
#   mkdir -p /tmp/sieve-headline
#   nohup benchmarks/headline_driver.sh > /tmp/sieve-headline/driver.log 2>&1 &
#
# Order: benchmarks/headline_runs.txt (seed-major within a setting: every arm's seed 1, then
# seed 2, ...; warm before cold), so a campaign cut short still compares every arm on the same
# seeds; benchmarks/campaign_time.py reads the same list. RUNS overrides it
# ("setting:arm:seed ..."). COMMIT=0 leaves git alone. A finished run is skipped.
#
# CODE=<folder> runs the benchmark from a pinned checkout (e.g. `git worktree add --detach
# /work/campaign <commit>`), so the repository can change under a 50-minute run without a lazy
# import of the running process meeting new code; progress files still land in this repository
# (--results) and are committed here. Each run file records the commit it ran at.
#
# START_CODE=<folder>: the checkout that built the committed warm start. A new machine has no
# warm weights (they live in /tmp). The same code gives the same bits only on a machine with the
# same CPU and libraries (b532374 rebuilt on the machine of 2026-12-06 gave another hash than it
# had given before), and other code does not (the later update path computes the same gradients
# within float tolerance, yet 12 updates end in other weights, which would pair with no finished
# run). Before the first run, if
# the warm weights are missing, benchmarks/headline_start.py builds them with START_CODE and
# stops the campaign unless their hash is a committed start record's.
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
    runs=$(sed -e 's/#.*//' benchmarks/headline_runs.txt | tr -s ' \n' ' ')
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

if [ -n "${START_CODE:-}" ] && [ "${POLICY:-smollm2}" != tiny ] \
    && [ ! -f "$STATE/warm/config.json" ] && [[ "$RUNS" == *warm:* ]]; then
    echo "driver: building the warm start with $START_CODE" \
        "at $(git -C "$START_CODE" rev-parse --short HEAD) $(date -u +%FT%TZ)"
    START_CODE=$START_CODE VLLM_LOGGING_LEVEL=WARNING nice -n "$NICE" "$PY" \
        benchmarks/headline_start.py --results "$MAIN/benchmarks/results" --state "$STATE" \
        >> "$LOG" 2>&1 || {
        [ -f benchmarks/results/headline_start.json ] \
            && commit "headline_start: the rebuilt warm start matches no record" \
            benchmarks/results/headline_start.json benchmarks/results/headline_start.png
        echo "driver: the warm start does not match (see $LOG)"; exit 1; }
    commit "headline_start: the rebuilt warm start matches its record" \
        benchmarks/results/headline_start.json benchmarks/results/headline_start.png
fi

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
