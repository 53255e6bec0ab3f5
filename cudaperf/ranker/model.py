"""The ranker network s_psi (PAPER-SPEC §3): MLP in -> 64 -> ReLU -> Dropout(0.1) -> 32 -> ReLU -> Dropout(0.1) -> 1."""

from __future__ import annotations

import torch
from torch import nn


class RankerMLP(nn.Module):
    def __init__(self, n_in: int, hidden: tuple[int, int] = (64, 32), dropout: float = 0.1) -> None:
        super().__init__()
        self.n_in = n_in
        self.net = nn.Sequential(
            nn.Linear(n_in, hidden[0]), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden[0], hidden[1]), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden[1], 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def pairwise_logistic_loss(s_pos: torch.Tensor, s_neg: torch.Tensor) -> torch.Tensor:
    """mean log(1 + exp(-(s(y+) - s(y-)))), computed stably as softplus."""
    return nn.functional.softplus(-(s_pos - s_neg)).mean()
