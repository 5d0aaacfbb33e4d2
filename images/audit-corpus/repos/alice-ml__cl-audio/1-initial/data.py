import csv
import os

import torch
import torchaudio
from torch.utils.data import Dataset


class ESC50(Dataset):
    def __init__(self, root, folds, sample_rate=44100, n_mels=128, augment=False):
        with open(os.path.join(root, "meta", "esc50.csv")) as f:
            rows = [r for r in csv.DictReader(f) if int(r["fold"]) in folds]
        self.items = [(os.path.join(root, "audio", r["filename"]), int(r["target"])) for r in rows]
        self.mel = torchaudio.transforms.MelSpectrogram(sample_rate, n_mels=n_mels)
        self.augment = augment

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, target = self.items[i]
        wav, _ = torchaudio.load(path)
        if self.augment:
            wav = torch.roll(wav, int(torch.randint(0, wav.shape[-1], (1,))), dims=-1)
        return self.mel(wav)[0].log1p(), target
