#!/bin/sh
# The schemathesis verdict: schemathesis (the CLI, `st`) against both services as a site runs
# them (real processes, admin tokens), every check and every phase (examples, coverage,
# fuzzing, stateful), with the widening of tests/data/api_schemathesis_<service>.toml (a
# schema-valid body may be refused for what a schema cannot say: 400/422).
#
#   bench/api/schemathesis_verdict.sh SEED MAX_EXAMPLES MAX_TIME OUTDIR [SERVICES]
#
# SERVICES: "scheduler controller" (the default) or one of them.
# prints each service's summary; the full output is OUTDIR/<service>.txt.
set -eu
SEED=${1:-7}; N=${2:-50}; MAX_TIME=${3:-600}; OUT=${4:-/tmp/sluice-schemathesis}
SERVICES=${5:-scheduler controller}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
ST=$(dirname "$PY")/st
mkdir -p "$OUT"; rm -f "$OUT"/jobs.db* "$OUT"/controller.json
SCHED_TOKEN=verdict-scheduler-token-0123; CTL_TOKEN=verdict-controller-token-0123
port() { "$PY" -c 'from ps_runtime.ports import free_port; print(free_port())'; }
SP=$(port); CP=$(port); OP=$(port)
SLUICE_SCHEDULER_TOKEN=$SCHED_TOKEN "$PY" -m sluice scheduler --listen 127.0.0.1:$SP \
    --db "$OUT/jobs.db" --slot 0.2 >"$OUT/scheduler.log" 2>&1 & SPID=$!
SLUICE_ADMIN_TOKEN=$CTL_TOKEN "$PY" -m sluice controller --api 127.0.0.1:$CP \
    --ofp-port $OP --state-file "$OUT/controller.json" >"$OUT/controller.log" 2>&1 & CPID=$!
trap 'kill $SPID $CPID 2>/dev/null || true' EXIT
for url in http://127.0.0.1:$SP http://127.0.0.1:$CP; do
    i=0; until curl -sf "$url/health" >/dev/null; do i=$((i+1)); [ $i -lt 300 ]; sleep 0.1; done
done
cd "$OUT"      # schemathesis keeps its cache (.schemathesis/) in the working directory
run() {  # service url token pid
    set -x
    "$ST" --config-file "$HERE/tests/api_schemathesis_$1.toml" run "$2/openapi.json" \
        --checks all --phases examples,coverage,fuzzing,stateful -n "$N" --seed "$SEED" \
        --workers 1 --max-time "$MAX_TIME" --generation-database none --no-color \
        -H "Authorization: Bearer $3" >"$OUT/$1.txt" 2>&1 || true
    { set +x; } 2>/dev/null
    echo "== $1: $(grep -E 'generated|Operations:|failure|error' "$OUT/$1.txt" | tr '\n' ' ')"
    kill -0 "$4" && echo "   $1 still running: $(curl -s "$2/health" | head -c 80)"
}
case " $SERVICES " in *" scheduler "*) run scheduler http://127.0.0.1:$SP $SCHED_TOKEN $SPID;; esac
case " $SERVICES " in *" controller "*) run controller http://127.0.0.1:$CP $CTL_TOKEN $CPID;; esac
