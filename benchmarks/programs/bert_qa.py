"""BERT question answering (span prediction), after HuggingFace's BertForQuestionAnswering.

Python features kept from the original: ``forward`` takes ``None``-default
arguments whose presence changes what runs (no mask -> all-ones mask, no
positions -> no loss), and it reads the parameter dtype with
``next(self.parameters())`` (a generator) to build the additive attention mask.
Half the synthetic batches carry padding and pass ``attention_mask``; the other
half are unpadded and pass ``None``, so both paths run during training.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything
from ._nn import BertConfig, BertEncoder, padding_mask

CONFIGS = {
    "small": BertConfig(vocab=1000, d_model=64, layers=2, heads=4, d_ff=256, max_len=128,
                        seq_len=48, batch_size=8),
    "full": BertConfig(vocab=30522, d_model=768, layers=12, heads=12, d_ff=3072, max_len=512,
                       seq_len=384, batch_size=12),
}

START_TOKEN, END_TOKEN = 5, 6  # mark the answer span so the task is learnable


class BertForQuestionAnswering(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.bert = BertEncoder(cfg)
        self.qa_outputs = nn.Linear(cfg.d_model, 2)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        start_positions: Optional[torch.Tensor] = None,
        end_positions: Optional[torch.Tensor] = None,
    ) -> Union[Tuple[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # As in HuggingFace: the mask follows the parameters' dtype (fp16-safe).
        dtype = next(self.parameters()).dtype
        ext = attention_mask[:, None, None, :].to(dtype=dtype)
        ext = (1.0 - ext) * -10000.0
        h = self.bert(input_ids, token_type_ids, ext)
        start_logits, end_logits = (z.squeeze(-1) for z in self.qa_outputs(h).split(1, dim=-1))
        if start_positions is None or end_positions is None:
            return start_logits, end_logits
        ignored = start_logits.size(1)
        start_positions = start_positions.clamp(0, ignored)
        end_positions = end_positions.clamp(0, ignored)
        loss = (F.cross_entropy(start_logits, start_positions, ignore_index=ignored)
                + F.cross_entropy(end_logits, end_positions, ignore_index=ignored)) / 2
        return loss, start_logits, end_logits


def make_batches(cfg: BertConfig, n: int, device: torch.device) -> List[Dict[str, torch.Tensor]]:
    """Question (segment 0) + context (segment 1); every other batch is padded."""
    batches = []
    b, t = cfg.batch_size, cfg.seq_len
    for k in range(n):
        ids = torch.randint(10, cfg.vocab, (b, t))
        q_len = t // 4
        lengths = [t] * b if k % 2 else torch.randint(t // 2, t + 1, (b,)).tolist()
        starts, ends = [], []
        for row, n_tok in enumerate(lengths):
            s = int(torch.randint(q_len + 1, n_tok - 2, (1,)))
            e = min(n_tok - 1, s + int(torch.randint(0, 4, (1,))))
            ids[row, s], ids[row, e] = START_TOKEN, END_TOKEN
            ids[row, n_tok:] = 0
            starts.append(s)
            ends.append(e)
        segments = torch.zeros(b, t, dtype=torch.long)
        segments[:, q_len:] = 1
        batch = {"input_ids": ids, "token_type_ids": segments,
                 "start_positions": torch.tensor(starts), "end_positions": torch.tensor(ends)}
        if k % 2 == 0:
            batch["attention_mask"] = padding_mask(lengths, t)
        batches.append({key: v.to(device) for key, v in batch.items()})
    return batches


class BertQAProgram(Program):
    name = "bert_qa"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        cfg = CONFIGS[size]
        seed_everything(seed)
        self.model = BertForQuestionAnswering(cfg).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3 if size == "small" else 3e-5)
        self.batches = make_batches(cfg, 4, self.device)

    def step(self, i: int) -> torch.Tensor:
        batch = cycle(self.batches, i)
        # ``attention_mask`` is absent (None) on unpadded batches.
        loss, _, _ = self.model(batch["input_ids"], attention_mask=batch.get("attention_mask"),
                                token_type_ids=batch["token_type_ids"],
                                start_positions=batch["start_positions"],
                                end_positions=batch["end_positions"])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> BertQAProgram:
    return BertQAProgram(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
