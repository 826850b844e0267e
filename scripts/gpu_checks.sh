#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in parts that each fit in about ten minutes. From the repository root:
#
#   bash scripts/gpu_checks.sh tests      # every @pytest.mark.gpu test (recorder, programs, ranks, labels, replay)
#   bash scripts/gpu_checks.sh truth      # benchmarks/whatif_truth.py, a process per pair: fixes against predictions
#   bash scripts/gpu_checks.sh overhead   # benchmarks/overhead.py --quick and stack_sampling.py
#   bash scripts/gpu_checks.sh parts      # benchmarks/overhead_parts.py --pairs: the recorder's cost on the
#                                         # framework loops, part by part (stacks, collections, hooks), and
#                                         # benchmarks/call_cost.py: its cost per op against its calibration
#   bash scripts/gpu_checks.sh fidelity   # benchmarks/fidelity.py: our GPU intervals against CUPTI's, every loop
#   bash scripts/gpu_checks.sh ddp        # record --nproc 2 of the gloo DDP test script (2 ranks, one GPU)
#   bash scripts/gpu_checks.sh samples    # re-record the sample traces (sample_traces/README.md)
#   bash scripts/gpu_checks.sh profiles   # torch.profiler traces of the what-if loops, for
#                                         # benchmarks/critical_vs_hta.py (HTA runs off the GPU machine)
#
# Results go to ${OUT:-gpu-checks}/ (Markdown sections to paste into benchmarks/RESULTS.md, logs). Works with
# torch alone: web-only packages (flask, plotly, msgspec) are not needed for any part.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-checks}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # absolute: some parts run from benchmarks/
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
case "${1:-}" in
tests)
    python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu 2>&1 | tee "$out/gpu-tests.log"
    ;;
truth)
    # one fresh process per pair, so that no pair's loops, recordings or heap weigh on the next one's timings
    pairs="$(cd benchmarks && python3 -c 'from whatif_loops import PAIRS; print(" ".join(p.name for p in PAIRS))')"
    for pair in $pairs; do
        python3 benchmarks/whatif_truth.py --pairs "$pair" --rounds 3 --md "$out/whatif_truth-$pair.md" \
            --traces "$out/traces" 2>&1 | tee -a "$out/whatif_truth.log"
    done
    ;;
overhead)
    (cd benchmarks && python3 overhead.py --quick --md "$out/overhead_quick.md") 2>&1 | tee "$out/overhead.log"
    (cd benchmarks && python3 stack_sampling.py --md "$out/stack_sampling.md") 2>&1 | tee -a "$out/overhead.log"
    ;;
parts)
    (cd benchmarks && python3 overhead_parts.py --pairs lightning-mlp,hf-trainer-gpt2,tiny-ops-graph \
        --modes rec,rec-nostacks,rec-nogc,rec-bare,client --rounds 3) 2>&1 | tee "$out/overhead_parts.log"
    (cd benchmarks && python3 call_cost.py --rounds 3) 2>&1 | tee "$out/call_cost.log"
    (cd benchmarks && python3 call_cost.py --ops fill,mul-add --after-graph --rounds 3) 2>&1 | tee -a "$out/call_cost.log"
    ;;
fidelity)
    python3 benchmarks/fidelity.py --md "$out/fidelity.md" 2>&1 | tee "$out/fidelity.log"
    ;;
ddp)
    (cd tests/gpu/scripts && python3 -m collector record --nproc 2 --no-probe ddp_ranks.py gloo \
        --out "$out/ddp.json.gz") 2>&1 | tee "$out/ddp.log"
    ;;
samples)
    python3 benchmarks/demos.py --demos naive,pinned,overlap,sync-trap,d2h --traces sample_traces \
        --profiler-trace sample_traces/torch-profiler-overlap.pt.trace.json.gz 2>&1 | tee "$out/samples.log"
    ;;
profiles)
    python3 benchmarks/critical_vs_hta.py --record "$out/profiles" 2>&1 | tee "$out/profiles.log"
    ;;
*)
    echo "usage: bash scripts/gpu_checks.sh tests|truth|overhead|parts|fidelity|ddp|samples|profiles" >&2
    exit 2
    ;;
esac
