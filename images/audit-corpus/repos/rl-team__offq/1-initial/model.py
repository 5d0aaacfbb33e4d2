import torch
import torch.nn as nn


def mlp(inp, out, hidden=256):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, out))


class Actor(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.net = mlp(obs_dim, act_dim)

    def forward(self, obs):
        return torch.tanh(self.net(obs))


class CriticEnsemble(nn.Module):
    def __init__(self, obs_dim, act_dim, num_critics=10):
        super().__init__()
        self.critics = nn.ModuleList(mlp(obs_dim + act_dim, 1) for _ in range(num_critics))

    def forward(self, obs, act):
        x = torch.cat([obs, act], -1)
        return torch.stack([c(x).squeeze(-1) for c in self.critics])
