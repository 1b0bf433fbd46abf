"""A small decoder-only transformer built in code (no downloads), cut into pipeline stages, and
the synthetic data it learns; shared by the example (train.py), the adapter's tests and the bench.

The model: token and position embeddings, ``layers`` pre-norm causal transformer blocks, a final
norm and an LM head. ``stage_module(config, s, S)`` is stage ``s`` of ``S``: stage 0 holds the
embeddings, the last the head, and the blocks are spread evenly (the first stages take one more
when they do not divide). The data are arithmetic token sequences ``(a + b i) mod V``, whose next
token follows from the two before it, so the loss falls within a few iterations.
"""

import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class ModelConfig:
    vocab: int = 256
    seq: int = 32
    d_model: int = 64
    heads: int = 4
    layers: int = 8


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        n = x.shape[1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class StageModule(nn.Module):
    """One pipeline stage: [embeddings] + blocks + [final norm and LM head]."""

    def __init__(self, config, first, last, blocks):
        super().__init__()
        d = config.d_model
        self.tok = nn.Embedding(config.vocab, d) if first else None
        self.pos = nn.Parameter(torch.randn(config.seq, d) * 0.02) if first else None
        self.blocks = nn.ModuleList(Block(d, config.heads) for _ in range(blocks))
        self.ln = nn.LayerNorm(d) if last else None
        self.head = nn.Linear(d, config.vocab, bias=False) if last else None

    def forward(self, x):
        if self.tok is not None:
            x = self.tok(x) + self.pos[: x.shape[1]]
        for block in self.blocks:
            x = block(x)
        if self.head is not None:
            x = self.head(self.ln(x))
        return x


def blocks_of(config, stage, num_stages):
    """How many blocks stage ``stage`` of ``num_stages`` holds."""
    base, extra = divmod(config.layers, num_stages)
    return base + (1 if stage < extra else 0)


def stage_module(config, stage, num_stages, seed=0):
    """Stage ``stage`` of ``num_stages``, its parameters drawn from a generator seeded by
    ``seed`` and the stage (the same on every run and rank layout)."""
    torch.manual_seed(seed * 1009 + stage)
    return StageModule(config, stage == 0, stage == num_stages - 1,
                       blocks_of(config, stage, num_stages))


def loss_fn(output, target):
    """Next-token cross entropy of the LM head's logits."""
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def batch(config, batch_size, iteration, seed=0):
    """(inputs, targets) of one iteration, the same on every rank: ``batch_size`` sequences."""
    g = torch.Generator().manual_seed(seed * 100003 + iteration)
    start = torch.randint(0, config.vocab, (batch_size, 1), generator=g)
    step = torch.randint(1, 4, (batch_size, 1), generator=g)
    tokens = (start + step * torch.arange(config.seq + 1)) % config.vocab
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
