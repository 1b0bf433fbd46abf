#!/usr/bin/env bash
# perseus.torch.attach on a real GPU, observe-only (it changes no GPU setting: NVML reads only):
# examples/torch_pipeline/train.py on CUDA, one process holding two stages of a looped schedule
# (interleaved 1F1B, 1 rank x 2 stages, 8 microbatches), bare and with Perseus attached
# (gpu="nvml", observe=True, no server: the default clock), alternated. Prints each run's median
# iteration time and, attached, the hooks' time per instruction and per iteration (with the
# device synchronised at every instruction boundary, the NVML backend's timing policy), and keeps
# every rank's result (the attached runs' last_window: per-instruction energies and errors).
# Then, read-only, what NVML's faster power readings give (instant_power.py: the instant and
# average power fields polled every 0.3 ms and the driver's buffered power samples, beside each
# forward's and backward's span; instant_power_summary.py prints their period, latency and
# whether they tell a forward from a backward). About 6 minutes on an H100.
# Needs build-device/ from bench/gpu/prepare.sh (carried), as run_on_device.sh does.
# Usage: bash bench/gpu/torch_attach_on_gpu.sh [pairs=3]; writes under $OUT (/tmp/perseus-gpu).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/perseus-gpu}
mkdir -p "$out"
package=$(bash "$root/bench/gpu/build_on_device.sh" 2>"$out/torch_build.log")
train=(python3 "$root/examples/torch_pipeline/train.py" --device cuda --ranks 1
  --schedule interleaved-1f1b --stages-per-rank 2 --microbatches 8 --batch-size 64 --seq 512
  --d-model 1024 --layers 8 --iterations 40 --quiet)
for pair in $(seq "${1:-3}"); do
  for mode in bare attached; do
    dir=$out/torch_$mode$pair
    mkdir -p "$dir"
    if [[ $mode == bare ]]; then
      PYTHONPATH=$package timeout 300 "${train[@]}" --no-perseus --result-dir "$dir"
    else
      PYTHONPATH=$package timeout 300 "${train[@]}" --gpu nvml --observe --result-dir "$dir"
    fi
  done
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out, rows = sys.argv[1], {"bare": [], "attached": []}
for path in sorted(glob.glob(os.path.join(out, "torch_*", "rank0.json"))):
    mode = "bare" if "torch_bare" in path else "attached"
    r = json.load(open(path))
    walls = r["wall_s"][5:]
    row = {"median_ms": 1e3 * statistics.median(walls)}
    if mode == "attached":
        row["hook_us_per_instruction"] = 1e6 * r["hook_seconds"] / r["instructions"]
        row["hook_ms_per_iteration"] = 1e3 * r["hook_seconds"] / len(r["wall_s"])
    rows[mode].append(row)
    print(mode, path, {k: round(v, 3) for k, v in row.items()})
bare = statistics.median(r["median_ms"] for r in rows["bare"])
attached = statistics.median(r["median_ms"] for r in rows["attached"])
print(f"bare_ms {bare:.2f} attached_ms {attached:.2f} overhead_pct {100 * (attached / bare - 1):.2f}")
print("hook_us_per_instruction", statistics.median(r["hook_us_per_instruction"] for r in rows["attached"]))
json.dump(rows, open(os.path.join(out, "torch_attach.json"), "w"), indent=1)
PY
timeout 120 python3 "$root/bench/gpu/instant_power.py" "$out/instant_power.json" \
  >"$out/instant_power.log" 2>&1 || echo "instant_power.py failed: $out/instant_power.log"
python3 "$root/bench/gpu/instant_power_summary.py" "$out/instant_power.json" |
  tee "$out/instant_power_summary.txt"
