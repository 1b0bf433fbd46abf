"""Device synchronization for instruction boundaries (torch imported lazily)."""

import sys

_cuda_available = None  # cached: None = not checked yet


def _torch():
    """The torch module, or None when it cannot be imported."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch
    try:
        import torch  # noqa: F811  (lazy: the package works without torch)
    except ImportError:
        return None
    return torch


def sync_device(device=None):
    """Wait for all queued work on a CUDA device (``torch.cuda.synchronize``).

    A no-op when torch is not importable or CUDA is unavailable. Instruction hooks call it so
    that time and energy are measured around the work itself, not around its asynchronous
    launch (Zeus does the same).
    """
    global _cuda_available
    if _cuda_available is False:
        return
    torch = _torch()
    if torch is None:
        _cuda_available = False
        return
    if _cuda_available is None:
        _cuda_available = bool(torch.cuda.is_available())
        if not _cuda_available:
            return
    torch.cuda.synchronize(device)
