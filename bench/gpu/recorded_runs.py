"""The recorded real-GPU runs (tests/data/h100_attribution_*.json, written by
attribution_on_gpu.py) as the client samples now: one reader for the layout's history, shared by
the scans here and python/tests/test_real_gpu_traces.py."""
import copy


def as_sampled_now(data, trace):
    """A copy of `trace` (one order's window of the run `data`) as the client's sampler would
    have recorded it now. Runs a and b were written by a sampler that kept its first read as a
    counter change (a refresh up to 100 ms old, read just after the window began); the sampler
    now starts at the first change, so that read goes."""
    t = copy.deepcopy(trace)
    if data.get("first_read_is_a_change", True):
        assert t["counter"][0][0] > t["known_from_s"], "the first entry is not the first read"
        t["counter"] = t["counter"][1:]
    return t
