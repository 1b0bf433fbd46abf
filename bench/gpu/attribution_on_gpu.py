"""Energy attribution on a real GPU, observe-only (issue 11): two bf16 transformer layers
(4096 wide, 32 heads, FFN 16384, sequence 2048), microbatch 1, 4 and 8, as in
../shared/data/gpu/h100-nvml.md.

Truth: the GPU runs only forwards (or only forward+backward pairs) for seconds, before and after
the case's windows (the mean is the truth; the difference is reported as drift), in two ways:
- packed (the issue's truth): this thread keeps enough work queued that the GPU never waits (it
  launches a batch of at least 25 ms of work, then reads the NVML energy counter once, which
  blocks it for about 4 ms), so every read falls inside the busy period. The power between the
  first and the last observed counter change, times the mean instruction time (CUDA events), is
  the energy of one instruction (backward = pair - forward).
- looped: the instructions run as the training loop under test runs them, each followed by a
  synchronize, so the GPU waits for the host between instructions (the autograd engine's start
  makes a backward's span about 0.5 ms longer than its packed time on an H100); a second thread
  polls the counter (a read releases the GIL). The power between the first and the last change,
  times the mean period of the loop, is the energy of one instruction. The difference between
  the two truths is the energy an instruction costs for being synchronized; an attribution of
  the windows can only split the energy that was spent, so it is judged against both.

Clocks: while each truth and each window runs, a thread samples the SM clock, whether the
power cap holds it down (the clock event reasons) and the driver's power reading every 2 ms
(read-only NVML calls). The summary prints them per truth and per instruction type: a
power-capped GPU runs an instruction after a pipeline bubble at a higher clock (and power) than
back to back, so the truths describe those instructions only as far as their clocks agree.

Under test: perseus.PipelineFrequencyOptimizer(gpu="nvml", observe=True) with
torch.cuda.synchronize() before each instruction's end hook (each hook's cost on the training
thread is timed), one reporting window of about 6 s per instruction order; the window's trace
(opt.last_window_trace) is attributed with every method (perseus.attribute), so all methods
judge the same measurements. Orders: forward and backward alternating (the data file's loop);
the first stage of a 4-stage 1F1B pipeline with 8 microbatches (3 warm-up forwards, 5
forward-backward pairs, 3 cool-down backwards); and the same with the bubbles that stage waits
in (the GPU idles for 1.5 x (forward + backward) after the warm-up and again at the end).

Never changes a GPU setting (observe-only; NVML reads only). Writes the results as JSON to
argv[1] and the traces (with their truth) to argv[2] after every case, so a run cut short still
reports what it measured.

`attribution_on_gpu.py --summary attribution.json` prints the acceptance lines of a run again.

PERSEUS_GPU_DRY=1 runs the same code on the CPU with a tiny model and the fake NVML library named
by $PERSEUS_FAKE_NVML (constant power), to check the script before spending GPU time.
"""
import json
import os
import sys
import time
import traceback

import torch

import perseus
from perseus.sync import cuda_uuid
from attribution_summary import summary
from gpu_models import memory_bound, transformer
from nvml_sampling import Poller, clock_poller, clocks_within, counter_changes, read, \
    window_clocks

DRY = os.environ.get("PERSEUS_GPU_DRY") == "1"
LIBRARY = os.environ["PERSEUS_FAKE_NVML"] if DRY else None
DEVICE = "cpu" if DRY else "cuda"
# "transformer" (the model) or "memory-bound": a model that streams memory and stays
# under an H100's power limit, so its instructions run at one clock in the truths and windows.
MODEL = os.environ.get("PERSEUS_GPU_MODEL", "transformer")
if MODEL not in ("transformer", "memory-bound"):
    sys.exit(f"PERSEUS_GPU_MODEL: unknown model '{MODEL}' (transformer or memory-bound)")
MEMORY_BOUND = MODEL == "memory-bound"
WIDTH, HEADS, FFN, SEQ = (64, 4, 128, 32) if DRY else (
    (8192, 0, 0, 2048) if MEMORY_BOUND else (4096, 32, 16384, 2048))
MICROBATCHES = (1, 4) if DRY else ((8, 16) if MEMORY_BOUND else (1, 4, 8))
if os.environ.get("PERSEUS_GPU_MICROBATCHES"):  # e.g. "2,4": shorter instructions
    MICROBATCHES = tuple(int(m) for m in os.environ["PERSEUS_GPU_MICROBATCHES"].split(","))
# How long each truth and each reporting window runs (PERSEUS_GPU_TRUTH_S, PERSEUS_GPU_WINDOW_S:
# the tests' dry run shortens both, with a fake counter that refreshes faster).
TRUTH_S = float(os.environ.get("PERSEUS_GPU_TRUTH_S") or (1.0 if DRY else 3.0))
# The packed truth reads the counter after each batch of instructions this long: a change is
# timed by the read that saw it, up to a batch late (on the CPU, where the batches are short
# windows of a loaded machine, reads come more often).
BATCH_S = 0.005 if DRY else 0.025
WINDOW_S = float(os.environ.get("PERSEUS_GPU_WINDOW_S") or (1.0 if DRY else 6.0))
METHODS = ("busy-overlap", "fit", "overlap", "deltas")
ORDERS = {"alternating": "FB", "1f1b": "FFF" + "FB" * 5 + "BBB",
          "1f1b_bubbles": "FFFI" + "FB" * 5 + "BBBI"}


def sync():
    if not DRY:
        torch.cuda.synchronize()


class Timer:
    """Elapsed time of queued work: CUDA events on the GPU, the wall clock on the CPU."""

    def __init__(self):
        if DRY:
            self.t0 = time.perf_counter()
        else:
            self.start, self.stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            self.start.record()

    def seconds(self):
        if DRY:
            return time.perf_counter() - self.t0
        self.stop.record()
        torch.cuda.synchronize()
        return self.start.elapsed_time(self.stop) / 1000.0


def model():
    net = memory_bound(WIDTH) if MEMORY_BOUND else transformer(WIDTH, HEADS, FFN)
    return net.to(DEVICE).to(torch.bfloat16)


def nvml_gpu():
    return perseus.NvmlGpu(0, LIBRARY) if LIBRARY else perseus.NvmlGpu(0)


def measured(changes, per, clocks):
    """A truth's (energy, time, counter changes, clocks) from its counter changes and the time
    of one instruction: the power between the first and the last change, times that time."""
    (ta, ea), (tb, eb) = changes[0], changes[-1]
    return (eb - ea) / (tb - ta) * per, per, len(changes), clocks_within(clocks.samples)


def truth(net, x, gpu, pairs):
    """Energy (J) and time (s) of one forward (pairs=False) or forward+backward pair, the
    number of counter changes the power came from, and the clocks meanwhile."""
    def one():
        y = net(x)
        if pairs:
            y.float().sum().backward()
    for _ in range(3):
        one()
    timer = Timer()
    one()
    per = timer.seconds()
    batch = max(1, int(BATCH_S / per) + 1)
    prefill = max(batch, int(0.3 / per) + 1)
    timer = Timer()
    for _ in range(prefill):
        one()
    n, end, reads = prefill, time.monotonic() + TRUTH_S, []
    with clock_poller(gpu) as clocks:
        while time.monotonic() < end:
            for _ in range(batch):
                one()
            n += batch
            reads.append(read(gpu))
    return measured(counter_changes(reads), timer.seconds() / n, clocks)


def looped_truth(net, x, gpu, pairs):
    """Energy (J) and time (s) of one forward (pairs=False) or forward+backward pair run as the
    loop under test runs them (a synchronize after each instruction), the number of counter
    changes the power came from, and the clocks meanwhile."""
    def one():
        y = net(x)
        sync()
        if pairs:
            y.float().sum().backward()
            sync()
    for _ in range(3):
        one()
    ends = []
    with Poller(gpu.total_energy) as counter, clock_poller(gpu) as clocks:
        end = time.monotonic() + TRUTH_S
        while time.monotonic() < end:
            one()
            ends.append(time.monotonic())
    changes = [c for c in counter_changes(counter.samples) if ends[0] <= c[0] <= ends[-1]]
    return measured(changes, (ends[-1] - ends[0]) / (len(ends) - 1), clocks)


class _NoHooks:
    def on_step_begin(self):
        pass

    def on_step_end(self):
        pass

    def on_instruction_begin(self, name):
        pass

    def on_instruction_end(self, name):
        pass


NO_HOOKS = _NoHooks()


def play(net, x, order, idle_s, hook, opt):
    """One iteration of `order` (F: forward of the next microbatch, B: backward of the oldest,
    I: the GPU idles for idle_s), each of opt's hooks called through hook(call, *args)."""
    hook(opt.on_step_begin)
    outputs = []
    for kind in order:
        if kind == "I":
            time.sleep(idle_s)
            continue
        name = "forward" if kind == "F" else "backward"
        hook(opt.on_instruction_begin, name)
        if kind == "F":
            outputs.append(net(x))
        else:
            outputs.pop(0).float().sum().backward()
        sync()
        hook(opt.on_instruction_end, name)
    hook(opt.on_step_end)


def run_window(net, x, gpu, order, per_iteration, idle_s):
    """One reporting window of iterations that run `order` after two unobserved warm-up
    iterations: its trace, the hooks' cost on the training thread, this harness's clock samples
    and the clocks the client itself reported per instruction (last_window["clocks"])."""
    for _ in range(2):  # warm-up: the allocator grows to this order's working set unobserved
        play(net, x, order, idle_s, lambda call, *args: call(*args), NO_HOOKS)
    sync()
    report_every = max(20, int(WINDOW_S / per_iteration))
    opt = perseus.PipelineFrequencyOptimizer(  # gpu="nvml": the user's path on a real GPU
        0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu=nvml_gpu() if DRY else "nvml", observe=True,
        report_every=report_every)
    iterations, hooks = 0, []

    def hook(call, *args):
        t0 = time.perf_counter()
        call(*args)
        hooks.append(time.perf_counter() - t0)

    with clock_poller(gpu) as clocks:
        while not opt.iterations:
            if iterations > 2 * report_every:
                raise RuntimeError(f"no reporting window closed after {iterations} iterations")
            play(net, x, order, idle_s, hook, opt)
            iterations += 1
    window = {"trace": opt.last_window_trace, "client_clocks": opt.last_window["clocks"],
              "clock_samples": clocks.samples, "opened_uuid": opt.gpu.uuid()}
    opt.close()
    hooks.sort()
    window["hook_us"] = {"median": 1e6 * hooks[len(hooks) // 2], "max": 1e6 * hooks[-1]}
    return window


def judged(trace, method, truths):
    """Mean attributed energy per forward and backward against each truth."""
    a = perseus.attribute(trace, method)
    row = {"method": a["method"], "intervals": a["intervals"], "idle_power_w": a["idle_power_w"]}
    for key in a["keys"]:
        name = key["name"]
        row[name] = {"mean_j": key["mean_energy_j"],
                     "mean_s": key["seconds"] / key["occurrences"],
                     "power_stderr_w": key["power_stderr_w"]}
        for truth_name, truth in truths.items():
            row[name][f"{truth_name}_error_pct"] = 100.0 * (key["mean_energy_j"] /
                                                            truth[f"{name}_j"] - 1.0)
    return row


def measure_truth(net, x, gpu, measure):
    f_e, f_t, f_changes, f_clocks = measure(net, x, gpu, pairs=False)
    p_e, p_t, p_changes, p_clocks = measure(net, x, gpu, pairs=True)
    return {"forward_j": f_e, "forward_s": f_t, "backward_j": p_e - f_e, "backward_s": p_t - f_t,
            "counter_changes": [f_changes, p_changes],
            "clocks": {"forward": f_clocks, "pair": p_clocks}}


TRUTHS = {"packed": truth, "looped": looped_truth}
QUANTITIES = ("forward_j", "forward_s", "backward_j", "backward_s")


def truths_of(net, x, gpu, when):
    out = {name: measure_truth(net, x, gpu, measure) for name, measure in TRUTHS.items()}
    print(x.shape[0], "truth", when, json.dumps(out), flush=True)
    return out


def mean_truth(before, after):
    """The mean of the truths measured before and after the windows; their difference is the
    drift."""
    mean = {k: 0.5 * (before[k] + after[k]) for k in QUANTITIES}
    mean["drift_pct"] = {k: 100.0 * (after[k] / before[k] - 1.0) for k in QUANTITIES}
    return mean


def case(net, mb, gpu):
    """Both truths before and after the windows (their mean is the truth, so a GPU that warms up
    over the case does not bias it), one window per order."""
    x = torch.randn(mb, SEQ, WIDTH, device=DEVICE, dtype=torch.bfloat16)
    before = truths_of(net, x, gpu, "before")
    pair_s = before["packed"]["forward_s"] + before["packed"]["backward_s"]
    rows, traces = {}, {}
    for order_name, order in ORDERS.items():
        idle_s = 1.5 * pair_s
        per_iteration = pair_s * order.count("F") + idle_s * order.count("I")
        try:
            window = run_window(net, x, gpu, order, per_iteration, idle_s)
            trace, clocks = window["trace"], window["clock_samples"]
            traces[order_name] = {"order": order, "idle_s": idle_s, "trace": trace,
                                  "clocks": [[t, *sample] for t, sample in clocks]}
            rows[order_name] = {"hook_us": window["hook_us"],
                                "opened_uuid": window["opened_uuid"],
                                "iterations": len(trace["iterations"]),
                                "clocks": window_clocks(trace, clocks),
                                "client_clocks": window["client_clocks"]}
        except Exception:  # keep measuring the other orders; the JSON says what failed
            rows[order_name] = {"error": traceback.format_exc()}
    after = truths_of(net, x, gpu, "after")
    truths = {name: mean_truth(before[name], after[name]) for name in TRUTHS}
    result = {"truth": truths["packed"], "looped_truth": truths["looped"],
              "truth_before": before, "truth_after": after}
    for order_name, row in rows.items():
        for method in METHODS if order_name in traces else ():
            row[method] = judged(traces[order_name]["trace"], method, truths)
        result[order_name] = row
        print(mb, order_name, json.dumps(row), flush=True)
    return result, {"truth": truths["packed"], "looped_truth": truths["looped"],
                    "orders": traces}


def main():
    out = {"device": "cpu (dry run)" if DRY else torch.cuda.get_device_name(0), "model": MODEL,
           "probe": perseus.gpu_probe(0, library=LIBRARY, duration=2.0),
           "cuda_uuid": None if DRY else cuda_uuid(0)}  # the GPU the client opens by UUID
    print(json.dumps(out), flush=True)
    traces = {"device": out["device"]}
    gpu = nvml_gpu()
    net = model()
    for mb in MICROBATCHES:
        out[f"microbatch_{mb}"], traces[f"microbatch_{mb}"] = case(net, mb, gpu)
        for path, data in ((sys.argv[1], out), (sys.argv[2], traces)):
            with open(path, "w") as f:
                json.dump(data, f, indent=None if data is traces else 2)
    print(summary(out, MICROBATCHES, ORDERS, TRUTHS), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--summary":  # the acceptance lines of an earlier run's attribution.json
        with open(sys.argv[2]) as f:
            print(summary(json.load(f), MICROBATCHES, ORDERS, TRUTHS))
    else:
        main()
