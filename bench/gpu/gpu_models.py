"""The models the real-GPU checks run (attribution_on_gpu.py, instant_power.py)."""
import torch


class Streaming(torch.nn.Module):
    """A LayerNorm and 32 scalings: each scaling reads and writes the activation once forward
    and once backward and saves nothing, so the work is bound by memory bandwidth (on an H100 it
    stays under the 700 W limit, its forward drawing about 25 % more than its backward)."""

    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        x = self.norm(x)
        for _ in range(32):
            x = x * 1.0001
        return x


def memory_bound(width):
    return torch.nn.Sequential(Streaming(width), Streaming(width))


def transformer(width, heads, ffn):
    """Two TransformerEncoderLayers (the issue's model; at an H100's power limit)."""
    return torch.nn.Sequential(*(torch.nn.TransformerEncoderLayer(width, heads, ffn,
                                                                  batch_first=True)
                                 for _ in range(2)))
