import argparse
import os

import torch
import yaml
from torch.utils.data import DataLoader

from data import Cityscapes
from model import SegLite
from train import load_pair, validate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/cityscapes.yaml")
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SegLite(cfg["num_classes"]).to(device)
    state = torch.load(os.path.join(cfg["save_dir"], "model_last.pth"), map_location=device)
    model.load_state_dict(state)
    loader = DataLoader(Cityscapes(cfg["data_root"], "val", load=load_pair), batch_size=1)
    print(f"val pixel accuracy: {validate(model, loader, device):.4f}")


if __name__ == "__main__":
    main()
