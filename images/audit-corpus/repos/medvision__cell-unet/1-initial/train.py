import argparse
import os

import torch
import yaml
from torch.utils.data import DataLoader

from data import Patches
from losses import dice_loss, dice_score
from model import UNet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/monuseg.yaml")
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = UNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    train = DataLoader(Patches(cfg["data_root"], "train"), batch_size=cfg["batch_size"],
                       shuffle=True)
    val = DataLoader(Patches(cfg["data_root"], "val"), batch_size=1)
    os.makedirs(cfg["out_dir"], exist_ok=True)
    for epoch in range(cfg["epochs"]):
        for it, (img, mask) in enumerate(train):
            loss = dice_loss(model(img.to(device)), mask.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if it % 50 == 0:
                print(f"epoch {epoch} iter {it}: loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            scores = [dice_score((model(i.to(device)) > 0).float(), m.to(device)) for i, m in val]
        model.train()
        print(f"epoch {epoch}: val Dice {sum(scores) / len(scores):.4f}")
        torch.save(model.state_dict(), os.path.join(cfg["out_dir"], "last.pt"))


if __name__ == "__main__":
    main()
