import torch
from torch import nn


class Model(nn.Module):
    """softmax(Q K^T / sqrt(d)) for one head: (batch, seq, d) inputs."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k):
        return torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)


def get_inputs():
    return [torch.randn(16, 512, 64), torch.randn(16, 512, 64)]


def get_init_inputs():
    return []
