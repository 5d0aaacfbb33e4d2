import json

import torch.nn.functional as F
from transformers import BertConfig, BertForSequenceClassification


def student(num_labels, config_path="configs/student.json"):
    cfg = BertConfig(**json.load(open(config_path)), num_labels=num_labels)
    return BertForSequenceClassification(cfg)


def distill_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    soft = F.kl_div(F.log_softmax(student_logits / temperature, -1),
                    F.softmax(teacher_logits / temperature, -1),
                    reduction="batchmean") * temperature ** 2
    hard = F.cross_entropy(student_logits, labels)
    return alpha * soft + (1 - alpha) * hard
