import torch
import torch.nn as nn


class PointMini(nn.Module):
    def __init__(self, num_classes=40, width=64):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Conv1d(3, width, 1), nn.BatchNorm1d(width), nn.ReLU(),
            nn.Conv1d(width, 4 * width, 1), nn.BatchNorm1d(4 * width), nn.ReLU(),
            nn.Conv1d(4 * width, 16 * width, 1), nn.BatchNorm1d(16 * width), nn.ReLU())
        self.head = nn.Sequential(
            nn.Linear(16 * width, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(256, num_classes))

    def forward(self, points):
        x = self.mlp(points.transpose(1, 2))
        return self.head(torch.max(x, dim=2)[0])
