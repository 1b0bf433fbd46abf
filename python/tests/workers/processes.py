"""What the workers share: a free loopback port for torch.distributed's rendezvous, and spawning
the ranks with it."""

import socket

import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(rank_main, nprocs, *args):
    """Runs rank_main(rank, *args, port) in `nprocs` processes; raises when one fails."""
    mp.spawn(rank_main, args=(*args, free_port()), nprocs=nprocs, join=True)
