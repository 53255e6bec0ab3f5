import torch
from torch import nn


class Model(nn.Module):
    """Each row divided by its L2 norm (plus eps)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / (x.norm(dim=1, keepdim=True) + 1e-6)


def get_inputs():
    return [torch.randn(32768, 512)]


def get_init_inputs():
    return []
