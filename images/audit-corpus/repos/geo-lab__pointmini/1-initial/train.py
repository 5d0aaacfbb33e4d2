import argparse
import os

import torch
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader
from tqdm import tqdm

from data import ModelNet40
from model import PointMini


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for pts, label in loader:
            correct += (model(pts.to(device)).argmax(1).cpu() == label).sum().item()
            total += label.numel()
    model.train()
    return correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train_loader = DataLoader(ModelNet40(cfg["data_root"], "train", cfg["num_points"]),
                              batch_size=cfg["batch_size"], shuffle=True, drop_last=True)
    test_loader = DataLoader(ModelNet40(cfg["data_root"], "test", cfg["num_points"]),
                             batch_size=cfg["batch_size"])
    model = PointMini(cfg["num_classes"]).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    os.makedirs(cfg["log_dir"], exist_ok=True)
    best = 0.0
    for epoch in range(cfg["epochs"]):
        for group in optimizer.param_groups:
            group["lr"] = cfg["lr_steps"][epoch // 40]
        for pts, label in tqdm(train_loader, desc=f"epoch {epoch}"):
            loss = F.cross_entropy(model(pts.to(device)), label.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        acc = evaluate(model, test_loader, device)
        if acc > best:
            best = acc
            torch.save(model.state_dict(), os.path.join(cfg["log_dir"], "best.pt"))
        print(f"epoch {epoch}: test accuracy {acc:.4f} (best {best:.4f})")


if __name__ == "__main__":
    main()
