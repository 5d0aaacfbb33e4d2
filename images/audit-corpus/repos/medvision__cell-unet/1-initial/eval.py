import argparse
import os

import torch
import yaml
from torch.utils.data import DataLoader

from data import Patches
from losses import dice_score
from model import UNet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/monuseg.yaml")
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    model = UNet()
    model.load_state_dict(torch.load(os.path.join(cfg["out_dir"], "last.pt"), map_location="cpu"))
    model.eval()
    with torch.no_grad():
        scores = [dice_score((model(i) > 0).float(), m)
                  for i, m in DataLoader(Patches(cfg["data_root"], "test"), batch_size=1)]
    print(f"test Dice: {100 * sum(scores) / len(scores):.2f}")


if __name__ == "__main__":
    main()
