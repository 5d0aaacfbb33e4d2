import os

import numpy as np
import torch
from torch.utils.data import Dataset


class Cityscapes(Dataset):
    def __init__(self, root, split, crop_size=None, load=None):
        self.images = sorted(os.listdir(os.path.join(root, "leftImg8bit", split)))
        self.root, self.split, self.crop_size, self.load = root, split, crop_size, load

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img, label = self.load(self.root, self.split, self.images[i])
        if self.crop_size:
            y = np.random.randint(0, img.shape[0] - self.crop_size + 1)
            x = np.random.randint(0, img.shape[1] - self.crop_size + 1)
            img = img[y:y + self.crop_size, x:x + self.crop_size]
            label = label[y:y + self.crop_size, x:x + self.crop_size]
        img = torch.from_numpy(img.transpose(2, 0, 1).astype(np.float32) / 255.0)
        return img, torch.from_numpy(label.astype(np.int64))
