import argparse
import os

import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from transformers import (AutoModelForSequenceClassification, AutoTokenizer,
                          get_linear_schedule_with_warmup)

from model import distill_loss, student

TASKS = {"mnli": (3, "premise", "hypothesis"), "sst2": (2, "sentence", None),
         "qnli": (2, "question", "sentence"), "qqp": (2, "question1", "question2")}


def encode(tokenizer, task, split):
    _, a, b = TASKS[task]
    data = load_dataset("glue", task, split=split)
    data = data.map(lambda x: tokenizer(x[a], x[b] if b else None, truncation=True,
                                        padding="max_length", max_length=128), batched=True)
    data.set_format("torch", columns=["input_ids", "attention_mask", "label"])
    return data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="mnli", choices=sorted(TASKS))
    parser.add_argument("--teacher", default="bert-base-uncased")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup_steps", type=int, default=0)
    parser.add_argument("--output_dir", default="output")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(args.teacher)
    num_labels = TASKS[args.task][0]
    teacher = AutoModelForSequenceClassification.from_pretrained(
        args.teacher, num_labels=num_labels).to(device).eval()
    model = student(num_labels).to(device)
    loader = DataLoader(encode(tokenizer, args.task, "train"), batch_size=args.batch_size,
                        shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, args.warmup_steps, args.epochs * len(loader))
    for epoch in range(args.epochs):
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            labels = batch.pop("label")
            with torch.no_grad():
                t_logits = teacher(**batch).logits
            loss = distill_loss(model(**batch).logits, t_logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    out = os.path.join(args.output_dir, args.task)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    main()
