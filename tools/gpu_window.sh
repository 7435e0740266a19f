#!/usr/bin/env bash
# The first device call of a session lent a GPU: what the last sessions left for one, in order,
# within one call (device tool: run it with timeout_s 590; the window is 15 minutes in all).
#
#   bash tools/gpu_window.sh <commit>             on the device (writes under $OUT)
#   OUT=/tmp/w bash tools/gpu_window.sh --rehearse <commit>    here, no GPU: the same steps in
#                                                              the simulator, to check the script
#
# 1. precompile on the device (tests/test_precompile.py -m gpu): three rungs' kernels built in
#    workers, loaded, launched and checked with nothing compiled in the process (<= 90 s); if it
#    fails, step 3 runs with --precompile 0
# 2. rung 24 `cluster`'s hang, bisected (docs/CLUSTER_HANG.md): fits_the_gpu, lost_arrival_traps,
#    then bisect_probe's variants, one process each (a trapped wait poisons the context), four at
#    a time (GPU_WINDOW_PROBE_JOBS), each ~12-15 s even when it hangs (the host watches the launch
#    and reports "hung" with a trace; -s prints the traces; a 30 s timeout behind that), no probe
#    started after 200 s; about 45-60 s in all on the device, one at a time it was ~150-200 s.  Left out since the H100's window of 2026-11-28:
#    the mechanisms' own probes, the persistent rung and batchnorm's special values (all passed
#    there) and the three full-rung tests (all hung there, 30 s each: bisect_probe's `full` and
#    `laddered` are those launches, traced)
# 3. `record --plan quick --new`: every rung and peer with no record of this GPU, precompiled,
#    a hung item costing 12 s, then Nsight Compute on rungs in no table, within the time left.
# 4. with GPU_WINDOW_TUNE_S=S (default 0; S >= 150; the two units get S/2 each), taken from step 3's seconds: `record --parts tune`,
#    rung 18's and 19's configurations checked and timed in the model's order (docs/RECORDING.md);
#    worth it where a GPU's records are mostly there: both the H100 and the H200 since 2026-11-28.
# $OUT gets: precompile_gpu.log, probes.log, rec.tgz (import it: perfkit record import), summary.md,
# and with step 4 tune.tgz (import it too) and tune-summary.md
set -u
rehearse=""
if [ "${1:-}" = "--rehearse" ]; then rehearse="--rehearse"; shift; fi
commit="${1:?usage: gpu_window.sh [--rehearse] <commit>}"
: "${OUT:?set OUT to the folder to write into}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=python3
[ -x .venv/bin/python ] && [ -n "$rehearse" ] && py=.venv/bin/python
if [ -n "$rehearse" ]; then backend=sim; else backend=gpu; fi
total=${GPU_WINDOW_S:-560}   # the call's seconds, less the start-up and the copy back
start=$SECONDS

echo "== 1. precompile on the device" | tee "$OUT/precompile_gpu.log"
timeout 90 env PERFKIT_BACKEND=$backend $py -m pytest -q -p no:cacheprovider -p no:xdist -rs \
    $([ -z "$rehearse" ] && echo "-m gpu") tests/test_precompile.py >> "$OUT/precompile_gpu.log" 2>&1
pre=$?
echo "exit $pre" >> "$OUT/precompile_gpu.log"
precompile=""  # a precompile that failed its GPU check is not trusted with the window: off
[ $pre -ne 0 ] && precompile="--precompile 0" && echo "precompile check failed: record runs with --precompile 0" | tee -a "$OUT/precompile_gpu.log"

echo "== 2. probes" > "$OUT/probes.log"
probes=("fits_the_gpu" "lost_arrival_traps" "bisect_probe and full" "bisect_probe and laddered"
        "bisect_probe and bare" "bisect_probe and no_setmaxnreg" "bisect_probe and producer_tail"
        "bisect_probe and ws_in_cluster" "bisect_probe and no_multicast" "bisect_probe and no_mma"
        "bisect_probe and one_stage_no_opt_in")
# one process each, GPU_WINDOW_PROBE_JOBS (default 4) at a time: processes share the GPU by time
# slices, so a probe that hangs holds no other back; each writes its own log, joined in list order
jobs_max=${GPU_WINDOW_PROBE_JOBS:-4}
n=0
for k in "${probes[@]}"; do
    n=$((n + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 0.5; done
    if [ $((SECONDS - start)) -gt 200 ]; then
        echo "-- $k: not run (the step's time is spent)" > "$OUT/probe-$n.log"
        continue
    fi
    ( timeout 30 env PERFKIT_BACKEND=$backend $py -m pytest -q -s -p no:cacheprovider -p no:xdist -rfE \
          tests/test_gemm_hopper.py -k "$k" > "$OUT/probe-$n.log" 2>&1
      echo "-- $k: exit $? at $((SECONDS - start)) s" >> "$OUT/probe-$n.log" ) &
done
wait
for i in $(seq 1 $n); do cat "$OUT/probe-$i.log" >> "$OUT/probes.log"; rm -f "$OUT/probe-$i.log"; done
echo "probes: $((SECONDS - start)) s" >> "$OUT/probes.log"

tune=${GPU_WINDOW_TUNE_S:-0}
left=$((total - (SECONDS - start) - tune))
[ $left -lt 120 ] && left=120
echo "== 3. record --new, budget $left s"
rm -rf /tmp/gpu-window-rec
$py tools/record_gpu.py --plan quick --new --stall-s 12 --budget-s $left --out /tmp/gpu-window-rec \
    --commit "$commit" --pack "$OUT/rec.tgz" $rehearse $precompile > "$OUT/record.log" 2>&1
echo "record exit $?"
cp /tmp/gpu-window-rec/summary.md "$OUT/" 2>/dev/null
tail -3 "$OUT/record.log"
left=$((total - (SECONDS - start)))
if [ "$tune" -gt 0 ] && [ $left -lt 150 ]; then
    echo "== 4. not run: $left s left of the call (the tune units need 150)"
elif [ "$tune" -gt 0 ]; then
    echo "== 4. record --parts tune, budget $left s"
    rm -rf /tmp/gpu-window-tune
    # caps of 210 s a unit at a 420 s budget: a budget of B gives each B / 2
    $py tools/record_gpu.py --plan quick --parts tune --budget-s $left --out /tmp/gpu-window-tune \
        --commit "$commit" --pack "$OUT/tune.tgz" $rehearse $precompile > "$OUT/tune.log" 2>&1
    echo "tune exit $?"
    cp /tmp/gpu-window-tune/summary.md "$OUT/tune-summary.md" 2>/dev/null
    tail -3 "$OUT/tune.log"
fi
echo "window: $((SECONDS - start)) s"
