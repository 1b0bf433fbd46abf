#!/usr/bin/env bash
# The paced closed loop on a real torch.distributed.pipelining job (examples/torch_pipeline/
# closed_loop.py: 4 CPU processes, the instruction profiler's full sweep, the frontier's fastest
# and least-energy plans served), then what the issue's figures ask of it: the fastest plan's
# measured iteration time against all-max's (target: within 1 %), and the least-energy plan's
# measured slowdown and saving against the planner's (target: within 1 point each); medians over
# the run's iterations after two. Time scale 0.5 (half a wall second per simulated second): what
# the real processes spend outside the paced instructions (gloo messages, the Python loop, window
# closes; 4 processes on this machine's 2 cores) is a larger share of a shorter paced iteration,
# and none of it is in the planner's model (closed_loop.py's default 0.2 is for a quick look).
# Usage: bash bench/torch_closed_loop.sh [out dir=out/torch_loop] [closed_loop.py options...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/torch_loop}
shift || true
export PYTHONPATH=$root/build/python${PYTHONPATH:+:$PYTHONPATH}
"${PERSEUS_VENV:-$root/.venv}/bin/python" "$root/examples/torch_pipeline/closed_loop.py" \
  --out "$out" --iterations 20 --time-scale 0.5 "$@"
/usr/bin/python3 - "$out/summary.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
fast, cheap = runs["fastest"], runs["min-energy"]
print(f"fastest_vs_allmax_time_pct {fast['slowdown_pct']:.2f}")
print(f"fastest_saving_pct measured {fast['saving_pct']:.2f} planned {fast['planned_saving_pct']:.2f}")
print(f"min_energy_slowdown_pct measured {cheap['slowdown_pct']:.2f} planned "
      f"{cheap['planned_slowdown_pct']:.2f} (diff {cheap['slowdown_pct'] - cheap['planned_slowdown_pct']:+.2f} points)")
print(f"min_energy_saving_pct measured {cheap['saving_pct']:.2f} planned "
      f"{cheap['planned_saving_pct']:.2f} (diff {cheap['saving_pct'] - cheap['planned_saving_pct']:+.2f} points)")
for name in ("fastest", "min-energy"):
    r = runs[name]
    print(f"{name}_clocks_followed {r['clocks_followed']} of {r['instructions_planned']}")
PY
