"""Energy attribution on a real GPU, observe-only (issue 11): two bf16 transformer layers
(4096 wide, 32 heads, FFN 16384, sequence 2048), microbatch 1 and 4, as in
../shared/data/gpu/h100-nvml.md.

Truth: the GPU runs only forwards (or only forward+backward pairs) back to back for seconds,
queued asynchronously, while this thread polls the NVML energy counter; the power between two
observed counter changes inside that window, times the mean instruction time (CUDA events),
is the energy of one instruction (backward = pair - forward).

Under test: perseus.PipelineFrequencyOptimizer(gpu="nvml", observe=True) with
torch.cuda.synchronize() inside each instruction hook, one reporting window of ~6 s; the mean
attributed energy per forward and backward, for the fit, overlap and deltas methods.

Never changes a GPU setting (observe-only; NVML reads only). Writes JSON to argv[1].
"""
import json
import sys
import time

import torch

import perseus

WIDTH, HEADS, FFN, SEQ = 4096, 32, 16384, 2048


def model():
    layers = [torch.nn.TransformerEncoderLayer(WIDTH, HEADS, FFN, batch_first=True)
              for _ in range(2)]
    return torch.nn.Sequential(*layers).cuda().to(torch.bfloat16)


def poll_power(gpu, seconds):
    """Average power between the first and the last counter change seen while polling."""
    end = time.monotonic() + seconds
    changes, last = [], None
    while time.monotonic() < end:
        t0 = time.monotonic()
        e = gpu.total_energy()
        t = 0.5 * (t0 + time.monotonic())
        if last is not None and e != last:
            changes.append((t, e))
        last = e
    (ta, ea), (tb, eb) = changes[0], changes[-1]
    return (eb - ea) / (tb - ta), len(changes)


def truth(net, x, gpu, pairs, seconds=3.0):
    """Energy (J) and time (s) of one forward (pairs=False) or forward+backward pair."""
    def one():
        y = net(x)
        if pairs:
            y.float().sum().backward()
    for _ in range(3):
        one()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    one()
    stop.record()
    torch.cuda.synchronize()
    per = start.elapsed_time(stop) / 1000.0
    n = int((seconds + 1.0) / per) + 1
    start.record()
    for _ in range(n):
        one()
    stop.record()
    time.sleep(0.3)  # poll inside the busy window only
    power, changes = poll_power(gpu, seconds - 0.3)
    torch.cuda.synchronize()
    per = start.elapsed_time(stop) / 1000.0 / n
    return power * per, per, changes


def main():
    out = {"device": torch.cuda.get_device_name(0), "probe": perseus.gpu_probe(0, duration=2.0)}
    gpu = perseus.NvmlGpu(0)
    net = model()
    for mb in (1, 4):
        x = torch.randn(mb, SEQ, WIDTH, device="cuda", dtype=torch.bfloat16)
        f_e, f_t, f_changes = truth(net, x, gpu, pairs=False)
        p_e, p_t, p_changes = truth(net, x, gpu, pairs=True)
        case = {"truth": {"forward_j": f_e, "forward_s": f_t, "backward_j": p_e - f_e,
                          "backward_s": p_t - f_t, "counter_changes": [f_changes, p_changes]}}
        for method in ("fit", "overlap", "deltas"):
            iterations = 0
            opt = perseus.PipelineFrequencyOptimizer(
                0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu="nvml", observe=True,
                attribution=method, report_every=max(20, int(6.0 / (f_t + p_t + 0.002))))
            while not opt.iterations:
                opt.on_step_begin()
                with opt.instruction("forward"):
                    y = net(x)
                    torch.cuda.synchronize()
                with opt.instruction("backward"):
                    y.float().sum().backward()
                    torch.cuda.synchronize()
                opt.on_step_end()
                iterations += 1
            w = opt.last_window
            row = {"iterations": iterations, "attribution": w["attribution"]}
            for name in ("forward", "backward"):
                occ = [e for it in w["energy_breakdown"][name] for e in it]
                times = [t for it in w["time_breakdown"][name] for t in it]
                mean = sum(occ) / len(occ)
                row[name] = {"mean_j": mean, "mean_s": sum(times) / len(times),
                             "error_pct": 100.0 * (mean / case["truth"][f"{name}_j"] - 1.0),
                             "zero_reads": sum(1 for e in occ if e == 0.0),
                             "stderr_j": w["energy_stderr"].get(name)}
            case[method] = row
            opt.close()
            print(mb, method, json.dumps(row), flush=True)
        out[f"microbatch_{mb}"] = case
        print(mb, json.dumps(case["truth"]), flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
