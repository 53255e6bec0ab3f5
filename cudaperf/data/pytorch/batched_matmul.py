import torch
from torch import nn


class Model(nn.Module):
    """Batched matrix product: (b, m, k) x (b, k, n)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(32, 256, 384), torch.randn(32, 384, 320)]


def get_init_inputs():
    return []
