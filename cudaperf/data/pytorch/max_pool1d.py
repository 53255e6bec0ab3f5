import torch
from torch import nn


class Model(nn.Module):
    """1-D max pooling (kernel 4, stride 2) over (batch, channels, length)."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(4, stride=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(64, 64, 8191)]


def get_init_inputs():
    return []
