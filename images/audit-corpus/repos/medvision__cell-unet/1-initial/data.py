import os

import numpy as np
import torch
from skimage import io
from torch.utils.data import Dataset


class Patches(Dataset):
    def __init__(self, root, split):
        self.dir = os.path.join(root, split)
        self.names = sorted(n for n in os.listdir(os.path.join(self.dir, "images")))

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        img = io.imread(os.path.join(self.dir, "images", self.names[i]))[:, :, :3]
        mask = io.imread(os.path.join(self.dir, "masks", self.names[i])) > 0
        img = torch.from_numpy(img.transpose(2, 0, 1).astype(np.float32) / 255.0)
        return img, torch.from_numpy(mask[None].astype(np.float32))
