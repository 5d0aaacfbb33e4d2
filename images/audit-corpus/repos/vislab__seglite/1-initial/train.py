import argparse
import os

import cv2
import torch
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader
from tqdm import tqdm

from data import Cityscapes
from model import SegLite


def load_pair(root, split, name):
    img = cv2.imread(os.path.join(root, "leftImg8bit", split, name))[:, :, ::-1]
    label_name = name.replace("leftImg8bit", "gtFine_labelTrainIds")
    label = cv2.imread(os.path.join(root, "gtFine", split, label_name), cv2.IMREAD_GRAYSCALE)
    return img, label


def validate(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for img, label in loader:
            pred = model(img.to(device)).argmax(1).cpu()
            valid = label != 255
            correct += (pred[valid] == label[valid]).sum().item()
            total += valid.sum().item()
    model.train()
    return correct / max(total, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/cityscapes.yaml")
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    batch_size = args.batch_size or cfg["batch_size"]
    train_set = Cityscapes(cfg["data_root"], "train", cfg["crop_size"], load=load_pair)
    val_set = Cityscapes(cfg["data_root"], "val", load=load_pair)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=4)
    val_loader = DataLoader(val_set, batch_size=1)
    model = SegLite(cfg["num_classes"]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"],
                                weight_decay=cfg["weight_decay"])
    os.makedirs(cfg["save_dir"], exist_ok=True)
    for epoch in range(cfg["epochs"]):
        for img, label in tqdm(train_loader, desc=f"epoch {epoch}"):
            loss = F.cross_entropy(model(img.to(device)), label.to(device), ignore_index=255)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        acc = validate(model, val_loader, device)
        print(f"epoch {epoch}: val pixel accuracy {acc:.4f}")
        torch.save(model.state_dict(), os.path.join(cfg["save_dir"], "model_last.pth"))


if __name__ == "__main__":
    main()
