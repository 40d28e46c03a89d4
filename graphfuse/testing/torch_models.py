"""The small PyTorch models graphfuse.torch_backend's tests and bench/bench_torch_backend.py run.

An MLP, a pre-norm transformer block (softmax attention, layer norm, gelu) and a CNN
(conv, batch norm, relu, pooling, linear), each at a test size and a bench size, so the
tests and the benchmark compile the same code. Weights come from torch's default
initialisation under a fixed seed; batch-norm statistics are set away from 0 and 1 so a
missing normalisation shows in the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from graphfuse.frontend.torch_fx.typed_torch import manual_seed


class MLP(nn.Sequential):
    """Linear-ReLU layers, then a linear head."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        layers: list[nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
            layers.append(nn.Linear(fan_in, fan_out))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        super().__init__(*layers)


class TransformerBlock(nn.Module):
    """Pre-norm self-attention and a gelu MLP, each with a residual (GPT-2's block)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        head = dim // self.heads
        q, k, v = self.qkv(self.norm1(x)).split(dim, dim=-1)
        q, k, v = (t.view(batch, tokens, self.heads, head).transpose(1, 2) for t in (q, k, v))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(head), dim=-1)
        attended = (weights @ v).transpose(1, 2).reshape(batch, tokens, dim)
        x = x + self.proj(attended)
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


class SmallCNN(nn.Module):
    """conv-bn-relu-maxpool twice, global average pooling, a linear classifier."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.BatchNorm2d(2 * channels),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(2 * channels, classes)
        for module in self.features:
            if isinstance(module, nn.BatchNorm2d):
                _spread_statistics(module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.head(torch.flatten(pooled, 1))


def _spread_statistics(norm: nn.BatchNorm2d) -> None:
    """Running statistics and affine parameters away from their identity values."""
    mean, var = norm.running_mean, norm.running_var
    assert mean is not None and var is not None  # track_running_stats is on
    with torch.no_grad():
        mean.uniform_(-0.5, 0.5)
        var.uniform_(0.5, 2.0)
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)


@dataclass(frozen=True)
class Sample:
    """A model in eval mode and an input for it."""

    model: nn.Module
    input: torch.Tensor


def _sample(make: Callable[[], nn.Module], shape: tuple[int, ...]) -> Sample:
    manual_seed(0)
    model = make().eval()
    return Sample(model, torch.randn(shape))


def mlp(bench: bool = False) -> Sample:
    if bench:
        return _sample(lambda: MLP((512, 1024, 1024, 256)), (64, 512))
    return _sample(lambda: MLP((32, 64, 48, 10)), (4, 32))


def transformer_block(bench: bool = False) -> Sample:
    if bench:
        return _sample(lambda: TransformerBlock(256, 4), (1, 128, 256))
    return _sample(lambda: TransformerBlock(32, 4), (2, 8, 32))


def cnn(bench: bool = False) -> Sample:
    if bench:
        return _sample(lambda: SmallCNN(32, 10), (8, 3, 32, 32))
    return _sample(lambda: SmallCNN(8, 5), (2, 3, 16, 16))


SAMPLES: dict[str, Callable[[bool], Sample]] = {
    "mlp": mlp,
    "transformer block": transformer_block,
    "cnn": cnn,
}
"""Each model by name: `SAMPLES[name](bench)`."""
