"""bench/gpu/instant_power_summary.py on a recording made up here: a forward/backward alternation
whose power readings (polled fields and buffered samples) follow the spans with a known lag and
period, so the summary must find that period, the lag and the two powers."""

import json
import os
import subprocess
import sys

SUMMARY = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu",
                       "instant_power_summary.py")
WALL0, MONO0 = 1.7e9, 1000.0  # the recording's clocks at its start
FORWARD_W, BACKWARD_W, LAG_S = 500.0, 400.0, 0.010


def recording():
    spans, t = [], MONO0
    for _ in range(200):  # 20 ms forwards, 30 ms backwards
        spans.append([t, t + 0.020, 0])
        spans.append([t + 0.020, t + 0.050, 1])
        t += 0.050

    def power_at(mono):
        for a, b, kind in spans:
            if a <= mono < b:
                return FORWARD_W if kind == 0 else BACKWARD_W
        return 0.0

    def driver_us(mono):
        return int(round((mono - MONO0 + WALL0) * 1e6))

    # Buffered samples every 4 ms, each the power LAG_S before its timestamp; polled fields
    # that change every 100 ms and are seen 2 ms after their timestamp.
    buffered, polls = [], []
    for i in range(2400):
        stamp = MONO0 + 0.1013 + 0.004 * i  # off the spans' edges
        buffered.append([driver_us(stamp), int(power_at(stamp - LAG_S) * 1000)])
    for i in range(99):
        stamp = MONO0 + 0.1 * (i + 1)
        mw = int(power_at(stamp - LAG_S) * 1000)
        field = [driver_us(stamp), 0, 1, mw]
        polls.append([stamp + 0.002, 0, [field, field]])
    return {"device": "made up", "cases": [{
        "model": "made-up", "order": "alternating", "gap_s": 0.0, "spans": spans,
        "samples": polls, "clocks": [WALL0, MONO0], "buffered_rc": 0, "buffered": buffered}]}


def test_finds_the_period_the_lag_and_both_powers(tmp_path):
    path = tmp_path / "instant_power.json"
    path.write_text(json.dumps(recording()))
    out = subprocess.run([sys.executable, SUMMARY, str(path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = {line.split(":")[0].strip(): line for line in out.stdout.splitlines()}
    buffered = lines["buffered"]
    assert "one every 4.0 ms" in buffered, buffered
    assert "lag 10 ms: forward 500 W" in buffered and "backward 400 W" in buffered, buffered
    assert "one every 100.0 ms" in lines["instant"], lines["instant"]
    assert "seen 2.0 ms" in out.stdout, out.stdout
