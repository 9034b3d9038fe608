"""BERT sequence classification (after NLPGNN's BERT-CLS example).

Python feature kept: a third-party call on fetched values every step. The
logits are pulled to NumPy and a metric (accuracy and macro-F1 via NumPy, a
running mean via the ``statistics`` module) is computed on the host, as the
original computes sklearn/NumPy metrics inside its training loop.
"""

from __future__ import annotations

import statistics
from typing import Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything
from ._nn import BertConfig, BertEncoder

CONFIGS = {
    "small": BertConfig(vocab=1000, d_model=64, layers=2, heads=4, d_ff=256, max_len=64,
                        seq_len=32, batch_size=12),
    "full": BertConfig(vocab=30522, d_model=768, layers=12, heads=12, d_ff=3072, max_len=512,
                       seq_len=128, batch_size=32),
}
NUM_CLASSES = 2
CUE_TOKENS = (7, 8)  # a class-specific token planted in each sequence


class BertClassifier(nn.Module):
    """Encoder + tanh pooler on [CLS] + linear classifier."""

    def __init__(self, cfg: BertConfig, num_classes: int) -> None:
        super().__init__()
        self.bert = BertEncoder(cfg)
        self.pooler = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.classifier = nn.Linear(cfg.d_model, num_classes)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        h = self.bert(input_ids, token_type_ids, None)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return self.classifier(self.drop(pooled))


def macro_f1(pred: np.ndarray, label: np.ndarray, num_classes: int) -> float:
    """Host-side metric in plain NumPy (stands in for sklearn's f1_score)."""
    scores = []
    for c in range(num_classes):
        tp = np.sum((pred == c) & (label == c))
        fp = np.sum((pred == c) & (label != c))
        fn = np.sum((pred != c) & (label == c))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def make_batches(cfg: BertConfig, n: int, device: torch.device
                 ) -> List[Tuple[torch.Tensor, torch.Tensor, np.ndarray]]:
    batches = []
    for _ in range(n):
        ids = torch.randint(10, cfg.vocab, (cfg.batch_size, cfg.seq_len))
        ids[:, 0] = 1  # [CLS]
        labels = torch.randint(0, NUM_CLASSES, (cfg.batch_size,))
        where = torch.randint(1, cfg.seq_len, (cfg.batch_size,))
        ids[torch.arange(cfg.batch_size), where] = torch.tensor(CUE_TOKENS)[labels]
        batches.append((ids.to(device), labels.to(device), labels.numpy()))
    return batches


class BertCLSProgram(Program):
    name = "bert_cls"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        self.cfg = cfg = CONFIGS[size]
        seed_everything(seed)
        self.model = BertClassifier(cfg, NUM_CLASSES).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3 if size == "small" else 2e-5)
        self.batches = make_batches(cfg, 4, self.device)
        self.segments = torch.zeros(cfg.batch_size, cfg.seq_len, dtype=torch.long, device=self.device)
        self.metrics: List[Dict[str, float]] = []

    def step(self, i: int) -> torch.Tensor:
        ids, labels, labels_np = cycle(self.batches, i)
        logits = self.model(ids, self.segments)
        loss = F.cross_entropy(logits, labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        # Third-party (NumPy / statistics) metric on fetched logits, every step.
        pred = logits.detach().cpu().numpy().argmax(-1)
        acc = float(np.mean(pred == labels_np))
        running = statistics.fmean([m["acc"] for m in self.metrics[-9:]] + [acc])
        self.metrics.append({"acc": acc, "f1": macro_f1(pred, labels_np, NUM_CLASSES),
                             "running_acc": running})
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> BertCLSProgram:
    return BertCLSProgram(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
