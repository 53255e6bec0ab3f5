import torch
from torch import nn


class Model(nn.Module):
    """Mean squared error between predictions and targets, per row (a scalar over 16M elements would be
    input-insensitive: every draw gives about 2.0)."""

    def __init__(self):
        super().__init__()

    def forward(self, pred, target):
        return torch.mean((pred - target) ** 2, dim=1)


def get_inputs():
    return [torch.randn(16384, 1024), torch.randn(16384, 1024)]


def get_init_inputs():
    return []
