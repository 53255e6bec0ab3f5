import torch
from torch import nn


class Model(nn.Module):
    """A 1-D convolution (padding 'same') followed by ReLU."""

    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, k, padding=k // 2)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(32, 16, 4096)]


def get_init_inputs():
    return [16, 32, 7]
