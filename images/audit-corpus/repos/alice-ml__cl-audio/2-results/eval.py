import argparse

import torch
import yaml
from torch.utils.data import DataLoader

from data import ESC50
from model import AudioEncoder

CHECKPOINT = "/home/alice/ckpt/best.pth"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/esc50.yaml")
    parser.add_argument("--fold", type=int, default=1)
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AudioEncoder(cfg["n_mels"]).to(device)
    model.load_state_dict(torch.load(CHECKPOINT, map_location=device))
    model.eval()
    data = ESC50(cfg["data_root"], [args.fold], cfg["sample_rate"], cfg["n_mels"])
    correct = 0
    with torch.no_grad():
        for mel, target in DataLoader(data, batch_size=64):
            correct += (model(mel.to(device)).argmax(1).cpu() == target).sum().item()
    print(f"fold {args.fold} accuracy: {100 * correct / len(data):.2f}")


if __name__ == "__main__":
    main()
