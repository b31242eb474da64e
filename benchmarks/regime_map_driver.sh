#!/usr/bin/env bash
# The regime map's runs (benchmarks/regime_map.py), one pool x arm x seed per process, seed-major
# (every pool's arms for seed 1, then seed 2, ...), each progress file committed when its run
# ends: a campaign cut short still compares every arm of every pool on the same seeds.
#
#   mkdir -p /tmp/sieve-regime
#   nohup benchmarks/regime_map_driver.sh > /tmp/sieve-regime/driver.log 2>&1 &
#
# CODE=<folder> runs from a pinned checkout (`git worktree add --detach /work/regime <commit>`);
# progress files land in this repository and are committed here. COMMIT=0 leaves git alone.
# THREADS sets OMP_NUM_THREADS; NICE the niceness (default 5). A finished run is skipped.
set -u
cd "$(dirname "$0")/.."
MAIN=$(pwd)
CODE=${CODE:-$MAIN}
PY=${PY:-$MAIN/.venv/bin/python}
NICE=${NICE:-5}
LOG=/tmp/sieve-regime/log.txt
mkdir -p /tmp/sieve-regime
[ -n "${THREADS:-}" ] && export OMP_NUM_THREADS=$THREADS
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
bench() {
    (cd "$CODE" && PYTHONPATH="$CODE" "$@" --model "$MAIN/data/models/tiny" \
        --results "$MAIN/benchmarks/results")
}
measured() {  # cells, pools and every pool's plan written
    "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); \
sys.exit(0 if r.get('pools') and all('plan' in p for p in r['pools']) else 1)" \
        benchmarks/results/regime_map.json 2>/dev/null
}
if ! measured; then
    echo "driver: measuring cells, pools and sieve plan $(date -u +%FT%TZ)"
    bench nice -n "$NICE" "$PY" benchmarks/regime_map.py --measure >> "$LOG" 2>&1 || exit 1
    commit "regime map: the tiny policy's cells, the pools and sieve plan's prediction per pool" \
        benchmarks/results/regime_map.json
fi
runs=$(bench "$PY" benchmarks/regime_map.py --list | tr ' ' ':')
for run in ${RUNS:-$runs}; do
    IFS=: read -r pool arm seed <<< "$run"
    file="benchmarks/results/regime_map_runs/$pool/cold_${arm}_s${seed}.json"
    done_before() {
        [ -f "$file" ] && "$PY" -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))\
['done'] else 1)" "$file"
    }
    if done_before; then echo "driver: $pool $arm s$seed done before"; continue; fi
    echo "driver: $pool $arm s$seed starts $(date -u +%FT%TZ) load $(cut -d' ' -f1 /proc/loadavg)" \
        "at $(git -C "$CODE" rev-parse --short HEAD)"
    bench nice -n "$NICE" "$PY" benchmarks/regime_map.py --run "$pool" "$arm" "$seed" >> "$LOG" 2>&1
    rc=$?
    echo "driver: $pool $arm s$seed exit $rc $(date -u +%FT%TZ)"
    if done_before; then
        line=$("$PY" -c "import json,sys; p=json.load(open(sys.argv[1])); f=p['final']; \
n=sum(s['update'] for s in p['steps']); r=sum(s['sampled'] for s in p['steps']); \
print(f\"{r} rollouts, {n} updates, greedy {p['curve'][0]['greedy']:.3f} -> {f['greedy']:.3f}, \
sampled {f['sampled']:.3f}, {p['seconds']:.0f} s\")" "$file")
        commit "regime map: $pool $arm seed $seed measured ($line)" "$file" \
            "benchmarks/results/regime_map_runs/$pool"/start_*.json
    else
        exit "$rc"
    fi
done
