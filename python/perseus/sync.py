"""CUDA devices as torch sees them: synchronization for instruction boundaries, and the UUID
CUDA reports for a device (both use torch only where the process has imported it)."""

import re
import sys

_UUID = re.compile(r"(GPU-)?[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")

_cuda_available = None  # cached once torch is imported: None = not checked yet


def sync_device(device=None):
    """Wait for all queued work on a CUDA device (``torch.cuda.synchronize``).

    A no-op when torch is not imported or CUDA is unavailable. Instruction hooks call it so that
    time and energy are measured around the work itself, not around its asynchronous launch (Zeus
    does the same). It never imports torch itself: a process that has not imported torch has no
    CUDA work of torch's queued, and an import from inside a training step would cost that step
    seconds and set environment variables (numpy's import does) while the client's threads run.
    """
    global _cuda_available
    if _cuda_available is False:
        return
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if _cuda_available is None:
        _cuda_available = bool(torch.cuda.is_available())
        if not _cuda_available:
            return
    torch.cuda.synchronize(device)


def cuda_uuid(device):
    """The UUID CUDA reports for CUDA device ``device`` (``"GPU-..."``), or None where torch cannot
    say without side effects: torch not imported, CUDA not initialized yet in this process (asking
    would initialize it), a torch without device UUIDs or with one in a form not known here, or a
    device CUDA does not have.

    The NVML backend opens the device of this UUID, so it controls the GPU the training computes
    on even where CUDA and NVML number devices differently (mixed GPUs under CUDA's default
    fastest-first order, MPS).
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    try:
        uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    except (AssertionError, RuntimeError):  # torch's answers for a device it does not have
        return None
    if uuid is None:
        return None
    text = str(uuid)
    if text.startswith("MIG-"):
        return text  # the NVML backend refuses it, naming it
    if not _UUID.fullmatch(text):
        return None  # not a form this knows: CUDA_VISIBLE_DEVICES decides
    return text if text.startswith("GPU-") else "GPU-" + text
