"""perseus.SimGpu: simulated time and energy follow the profile CSV rows."""

import time

import pytest

import perseus
from conftest import other_thread_resumes_during

BLOCK_W = 83.64


def sim(profile, stage=0, **kw):
    kw.setdefault("counter", "ideal")  # exact energies
    return perseus.SimGpu(profile, stage=stage, blocking_power=BLOCK_W, **kw)


def test_supported_clocks_are_the_profiled_ones(profile2, profile2_rows):
    gpu = sim(profile2, stage=1)
    clocks = gpu.supported_clocks()
    assert clocks == sorted(clocks, reverse=True)
    assert set(clocks) == set(profile2_rows[(1, "forward")])


@pytest.mark.parametrize("stage", [0, 1])
def test_default_clock_is_the_highest(profile2, profile2_rows, stage):
    gpu = sim(profile2, stage=stage)
    assert gpu.now() == 0.0 and gpu.total_energy() == 0.0
    rows = profile2_rows[(stage, "forward")]
    fmax = max(rows)
    assert gpu.current_clock("forward") == fmax
    gpu.instruction_begin("forward")
    gpu.instruction_end("forward")
    t, e = rows[fmax]
    assert gpu.now() == pytest.approx(t, rel=1e-9)
    assert gpu.total_energy() == pytest.approx(e, rel=1e-9)


def test_locked_clock_and_blocking(profile2, profile2_rows):
    gpu = sim(profile2, stage=1)
    fwd, bwd = profile2_rows[(1, "forward")], profile2_rows[(1, "backward")]
    mid = sorted(fwd)[len(fwd) // 2]
    low = min(bwd)
    expect_t = expect_e = 0.0

    gpu.lock_clock(mid)
    assert gpu.current_clock("forward") == mid
    gpu.instruction_begin("forward")
    gpu.instruction_end("forward")
    expect_t += fwd[mid][0]
    expect_e += fwd[mid][1]
    assert gpu.now() == pytest.approx(expect_t, rel=1e-9)
    assert gpu.total_energy() == pytest.approx(expect_e, rel=1e-9)

    # Blocked (e.g. on pipeline communication) until t + 0.5 s at the blocking power.
    gpu.wait_until(expect_t + 0.5)
    expect_t += 0.5
    expect_e += 0.5 * BLOCK_W
    assert gpu.now() == pytest.approx(expect_t, rel=1e-9)
    assert gpu.total_energy() == pytest.approx(expect_e, rel=1e-9)
    gpu.wait_until(0.0)  # in the past: no-op
    assert gpu.now() == pytest.approx(expect_t, rel=1e-9)

    gpu.lock_clock(low)
    gpu.instruction_begin("backward")
    gpu.instruction_end("backward")
    expect_t += bwd[low][0]
    expect_e += bwd[low][1]
    assert gpu.now() == pytest.approx(expect_t, rel=1e-9)
    assert gpu.total_energy() == pytest.approx(expect_e, rel=1e-9)

    gpu.reset_clock()
    assert gpu.current_clock("backward") == max(bwd)


def test_power_limit_picks_fastest_clock_within_limit(profile2, profile2_rows):
    gpu = sim(profile2, stage=0)
    rows = profile2_rows[(0, "forward")]
    powers = {f: e / t for f, (t, e) in rows.items()}
    limit = sorted(powers.values())[len(powers) // 2]
    gpu.set_power_limit(limit)
    expected = max(f for f, p in powers.items() if p <= limit)
    assert gpu.current_clock("forward") == expected
    gpu.reset_power_limit()
    assert gpu.current_clock("forward") == max(rows)


def test_unsupported_clock_raises(profile2):
    gpu = sim(profile2)
    with pytest.raises(perseus.PerseusError):
        gpu.lock_clock(1)


def test_real_time_mode_sleeps_scaled_duration(profile2, profile2_rows):
    scale = 0.1
    gpu = sim(profile2, stage=0, real_time=True, time_scale=scale)
    t_fwd = profile2_rows[(0, "forward")][max(profile2_rows[(0, "forward")])][0]
    start_sim, start = gpu.now(), time.monotonic()
    gpu.instruction_begin("forward")
    gpu.instruction_end("forward")
    wall = time.monotonic() - start
    assert wall >= t_fwd * scale * 0.95
    assert gpu.now() - start_sim >= t_fwd * 0.95
    rows = profile2_rows[(0, "forward")]
    assert gpu.total_energy() >= rows[max(rows)][1] * 0.99


def test_bad_stage_raises(profile2):
    with pytest.raises(perseus.PerseusError):
        perseus.SimGpu(profile2, stage=5)


def test_missing_profile_raises(tmp_path):
    path = tmp_path / "nope.csv"
    with pytest.raises(perseus.PerseusError, match="nope.csv"):
        perseus.SimGpu(str(path))


def test_malformed_profile_names_file(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("stage,instruction,frequency,time\n0,forward,1410,0.1\n")
    with pytest.raises(perseus.PerseusError, match="bad.csv"):
        perseus.SimGpu(str(path))


@pytest.mark.parametrize("lag_s, window_s, tau_s", [(0.0, 0.0, 0.0), (0.008, 0.0, 0.0),
                                                    (0.010, 0.020, 0.0), (0.0, 0.0, 0.0115)])
def test_realistic_counter_changes_only_at_refreshes(profile2, profile2_rows, lag_s, window_s,
                                                     tau_s):
    gpu = sim(profile2, counter="realistic",
              counter_options={"refresh_jitter_s": 0.0, "refresh_phase_s": 0.1, "lag_s": lag_s,
                               "window_s": window_s, "time_constant_s": tau_s})
    fwd = profile2_rows[(0, "forward")][max(profile2_rows[(0, "forward")])]
    n = int(0.25 / fwd[0]) + 1  # a quarter second of forwards
    for _ in range(n):
        gpu.instruction_begin("forward")
        gpu.instruction_end("forward")
    truth = gpu.true_energy()
    assert truth == pytest.approx(n * fwd[1], rel=1e-9)
    # The counter holds the value of the last refresh (at 0.2 s), below the true energy: the
    # energy up to lag_s before it (constant power from 0, its first refresh a whole period).
    read = gpu.total_energy()
    assert 0 < read < truth
    # With a lag, the refresh at 0.2 s holds the busy energy up to 0.2 - lag_s (on average over
    # the window around it) and, before 0, a lag's worth at the idle (blocking) power, which is
    # below the busy power.
    # A first-order response (time constant tau) holds it up to 0.2 - tau on average.
    power = truth / gpu.now()
    if lag_s == 0.0 and tau_s == 0.0:
        assert read == pytest.approx(power * 0.2, rel=1e-6)
    else:
        assert power * (0.2 - lag_s - window_s / 2 - 8 * tau_s) < read < power * 0.2 * (1 - 1e-6)


def test_counter_options_are_checked(profile2):
    with pytest.raises(perseus.PerseusError, match="refresh_period_s"):
        sim(profile2, counter="realistic", counter_options={"refresh_period_s": -1.0})
    with pytest.raises(perseus.PerseusError, match="refresh_phase_s"):
        sim(profile2, counter="realistic", counter_options={"refresh_phase_s": 0.5})
    with pytest.raises(perseus.PerseusError, match="'window_s': must be >= 0 and at most twice"):
        sim(profile2, counter="realistic", counter_options={"lag_s": 0.005, "window_s": 0.02})
    with pytest.raises(perseus.PerseusError, match="'window_s': must be 0 with a first-order"):
        sim(profile2, counter="realistic", counter_options={"time_constant_s": 0.0115})
    with pytest.raises(perseus.PerseusError, match="unknown field 'bogus'"):
        sim(profile2, counter="realistic", counter_options={"bogus": 1.0})
    with pytest.raises(perseus.PerseusError, match="unknown energy counter"):
        sim(profile2, counter="perfect")


def test_a_real_time_counter_read_lets_other_threads_run(profile2):
    gpu = sim(profile2, real_time=True, counter="realistic",
              counter_options={"read_latency_s": 0.3})
    resumed, read = other_thread_resumes_during(gpu.total_energy)
    assert read >= 0.3
    assert resumed < 0.15, f"this thread waited {resumed:.3f} s for a {read:.3f} s read"
