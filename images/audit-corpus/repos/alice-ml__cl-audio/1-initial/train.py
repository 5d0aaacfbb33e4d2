import argparse

import torch
import yaml
from torch.utils.data import DataLoader

from data import ESC50
from model import AudioEncoder, nt_xent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/esc50.yaml")
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = ESC50(cfg["data_root"], cfg["folds"], cfg["sample_rate"], cfg["n_mels"], augment=True)
    loader = DataLoader(data, batch_size=cfg["batch_size"], shuffle=True, drop_last=True)
    model = AudioEncoder(cfg["n_mels"]).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    for epoch in range(cfg["epochs"]):
        for mel, _ in loader:
            mel = mel.to(device)
            z1 = model.proj(model.embed(mel))
            z2 = model.proj(model.embed(mel + 0.01 * torch.randn_like(mel)))
            loss = nt_xent(z1, z2, cfg["temperature"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
        torch.save(model.state_dict(), "checkpoints/last.pth")


if __name__ == "__main__":
    main()
