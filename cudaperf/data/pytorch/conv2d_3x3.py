import torch
from torch import nn


class Model(nn.Module):
    """A 3x3 2-D convolution with padding 1, followed by a per-channel bias and ReLU."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(8, 16, 128, 128)]


def get_init_inputs():
    return [16, 32]
