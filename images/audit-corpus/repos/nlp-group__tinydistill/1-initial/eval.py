import argparse

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from train import encode


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="mnli")
    parser.add_argument("--model_dir", required=True)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir).to(device).eval()
    split = "validation_matched" if args.task == "mnli" else "validation"
    correct = total = 0
    with torch.no_grad():
        for batch in DataLoader(encode(tokenizer, args.task, split), batch_size=64):
            batch = {k: v.to(device) for k, v in batch.items()}
            labels = batch.pop("label")
            correct += (model(**batch).logits.argmax(-1) == labels).sum().item()
            total += labels.numel()
    print(f"{args.task} accuracy: {100 * correct / total:.2f}")


if __name__ == "__main__":
    main()
