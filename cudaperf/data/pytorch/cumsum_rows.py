import torch
from torch import nn


class Model(nn.Module):
    """Inclusive prefix sum along each row."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.rand(4096, 4000)]


def get_init_inputs():
    return []
