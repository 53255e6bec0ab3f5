import torch
from torch import nn


class Model(nn.Module):
    """y = x^T + b for a (rows, cols) matrix x and a (cols, rows) matrix b."""

    def __init__(self):
        super().__init__()

    def forward(self, x, b):
        return x.t() + b


def get_inputs():
    return [torch.randn(4096, 3072), torch.randn(3072, 4096)]


def get_init_inputs():
    return []
