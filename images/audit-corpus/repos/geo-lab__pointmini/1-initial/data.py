import os

import numpy as np
import torch
from torch.utils.data import Dataset


class ModelNet40(Dataset):
    def __init__(self, root, split, num_points=1024):
        with open(os.path.join(root, f"modelnet40_{split}.txt")) as f:
            self.names = [line.strip() for line in f]
        self.root, self.num_points = root, num_points

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        name = self.names[i]
        shape = "_".join(name.split("_")[:-1])
        pts = np.loadtxt(os.path.join(self.root, shape, name + ".txt"), delimiter=",")
        pts = pts[: self.num_points, :3].astype(np.float32)
        pts = pts - pts.mean(0)
        pts = pts / np.max(np.linalg.norm(pts, axis=1))
        with open(os.path.join(self.root, "modelnet40_shape_names.txt")) as f:
            classes = [line.strip() for line in f]
        return torch.from_numpy(pts), classes.index(shape)
