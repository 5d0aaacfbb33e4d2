import argparse

import torch
import yaml
from torch.utils.data import DataLoader

from data import ModelNet40
from model import PointMini
from train import evaluate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--weights", required=True)
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = PointMini(cfg["num_classes"]).to(device)
    model.load_state_dict(torch.load(args.weights, map_location=device))
    loader = DataLoader(ModelNet40(cfg["data_root"], "test", cfg["num_points"]), batch_size=32)
    print(f"overall accuracy: {100 * evaluate(model, loader, device):.2f}")


if __name__ == "__main__":
    main()
