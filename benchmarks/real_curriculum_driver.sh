#!/usr/bin/env bash
# The full real_curriculum run, one arm x seed at a time, each committed when it ends.
#
# The machines this project runs on do not outlive a session, and an unfinished arm x seed needs
# its weights (never committed) to resume. So each arm x seed runs in its own process and its
# progress file (with the base evaluation's cache) is committed as soon as it is done; a session
# that ends mid-run loses only the arm x seed under way, which the next session starts over.
# Finished runs are skipped without loading the engine. When every run is done it writes the
# summary (results/real_curriculum.json + .png) for a person to render the docs from and commit.
#
#   nohup benchmarks/real_curriculum_driver.sh > /tmp/sieve-real-curriculum/driver.log 2>&1 &
#
# The Sieve arms (sieve, sieve_every_rollout) are retired: they ran a copy of the product's night,
# and their committed progress files stay as measured history (the summary still reads them);
# `benchmarks/headline.py --arms night` runs the product's own night. The driver skips them,
# also when RUNS names them.
#
# Order: every runnable arm's seed 1, then every runnable arm's seed 2, so a run cut short still
# compares the arms on one seed. RUNS overrides it ("arm:seed ..."). COMMIT=0 leaves git alone.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv-vllm/bin/python}
STATE=/tmp/sieve-real-curriculum
RUNS_DIR=benchmarks/results/real_curriculum_runs
RUNS=${RUNS:-"uniform:1 dapo:1 greso:1 uniform:2 dapo:2 greso:2"}
mkdir -p "$STATE"

done_run() {  # whether <arm> x <seed> is finished, measured with today's verifier
    "$PY" benchmarks/real_curriculum.py --is-done --arms "$1" --seeds "$2" 2>/dev/null
}

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
    arm=${run%%:*} seed=${run##*:}
    case $arm in
    sieve | sieve_every_rollout)
        echo "driver: $arm s$seed skipped: the arm is retired (its committed runs are kept)"
        continue
        ;;
    esac
    if done_run "$arm" "$seed"; then
        echo "driver: $arm s$seed done before"
        continue
    fi
    echo "driver: $arm s$seed starts $(date -u +%FT%TZ)"
    VLLM_LOGGING_LEVEL=WARNING nice -n 5 "$PY" benchmarks/real_curriculum.py \
        --arms "$arm" --seeds "$seed" --no-summary >> "$STATE/log.txt" 2>&1
    rc=$?
    echo "driver: $arm s$seed exit $rc $(date -u +%FT%TZ)"
    if done_run "$arm" "$seed"; then
        line=$("$PY" -c "import json,sys; p=json.load(open(sys.argv[1])); c=p['curve'][-1]; \
print(f\"{p['rollouts']} rollouts, sampled {p['curve'][0]['sampled']:.3f} -> {c['sampled']:.3f}, \
greedy {c['greedy']:.3f}, {p['seconds']:.0f} s\")" "$RUNS_DIR/${arm}_s${seed}.json")
        commit "real_curriculum: $arm seed $seed measured ($line)" \
            "$RUNS_DIR/${arm}_s${seed}.json" "$RUNS_DIR"/base_eval_*.json
    else
        exit "$rc"
    fi
done

# The summary is not committed here: the docs are rendered from it (`make docs`), and a JSON
# committed without them fails `make docs-check`.
seeds=$(for run in $RUNS; do echo "${run##*:}"; done | sort -u | tr '\n' ' ')
"$PY" benchmarks/real_curriculum.py --summarise --seeds $seeds >> "$STATE/log.txt" 2>&1
echo "driver: all runs done; summary written: render the docs (make docs) and commit them with it"
