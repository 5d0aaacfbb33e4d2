import torch

EPS = 1e-6


def dice_loss(logits, target):
    prob = torch.sigmoid(logits)
    inter = (prob * target).sum((1, 2, 3))
    union = prob.sum((1, 2, 3)) + target.sum((1, 2, 3))
    return 1 - ((2 * inter + EPS) / (union + EPS)).mean()


def dice_score(pred, target):
    inter = (pred * target).sum()
    return ((2 * inter + EPS) / (pred.sum() + target.sum() + EPS)).item()
