"""YOLOv3: darknet-style residual backbone with three detection scales.

Python feature kept: target assignment runs in NumPy on *fetched predictions*.
Each step pulls the raw head outputs to the host (``.detach().cpu().numpy()``),
decodes boxes, and (a) picks for every ground-truth box the anchor at its cell
whose current predicted box overlaps it best and (b) drops the no-object loss
for predictions that already overlap some ground truth (YOLOv3's ignore
threshold). The resulting masks are fed back as tensors, so the loss graph
depends on materialized values and has data-dependent shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything

# YOLOv3's COCO anchors in pixels at 416x416, grouped by output stride 8/16/32.
ANCHORS_416 = np.array([[10, 13], [16, 30], [33, 23],
                        [30, 61], [62, 45], [59, 119],
                        [116, 90], [156, 198], [373, 326]], dtype=np.float64)
STRIDES = (8, 16, 32)
NUM_ANCHORS = 3


@dataclass(frozen=True)
class YoloConfig:
    image_size: int
    batch_size: int
    num_classes: int
    base_width: int
    blocks: Tuple[int, ...]  # residual blocks per darknet stage
    max_objects: int


CONFIGS = {
    "small": YoloConfig(image_size=64, batch_size=4, num_classes=3, base_width=8,
                        blocks=(1, 1, 1, 1, 1), max_objects=3),
    "full": YoloConfig(image_size=416, batch_size=16, num_classes=80, base_width=32,
                       blocks=(1, 2, 8, 8, 4), max_objects=10),
}


def conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
    """Darknet unit: conv + BN + LeakyReLU(0.1)."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.LeakyReLU(0.1, inplace=True))


class Residual(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(conv(c, c // 2, 1), conv(c // 2, c, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class Darknet(nn.Module):
    """Five stride-2 stages; returns the stride 8, 16 and 32 feature maps."""

    def __init__(self, cfg: YoloConfig) -> None:
        super().__init__()
        w = cfg.base_width
        self.stem = conv(3, w, 3)
        stages = []
        for s, n in enumerate(cfg.blocks):
            cin, cout = w * 2**s, w * 2**(s + 1)
            stages.append(nn.Sequential(conv(cin, cout, 3, 2), *[Residual(cout) for _ in range(n)]))
        self.stages = nn.ModuleList(stages)
        self.channels = [w * 2**3, w * 2**4, w * 2**5]

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        return feats[2:]


class YoloV3(nn.Module):
    """Backbone + FPN-style heads (upsample and concatenate), coarse to fine."""

    def __init__(self, cfg: YoloConfig) -> None:
        super().__init__()
        self.backbone = Darknet(cfg)
        c3, c4, c5 = self.backbone.channels
        out = NUM_ANCHORS * (5 + cfg.num_classes)
        self.block5 = nn.Sequential(conv(c5, c5 // 2, 1), conv(c5 // 2, c5, 3), conv(c5, c5 // 2, 1))
        self.pred5 = nn.Sequential(conv(c5 // 2, c5, 3), nn.Conv2d(c5, out, 1))
        self.lat5 = conv(c5 // 2, c4 // 2, 1)
        self.block4 = nn.Sequential(conv(c4 + c4 // 2, c4 // 2, 1), conv(c4 // 2, c4, 3),
                                    conv(c4, c4 // 2, 1))
        self.pred4 = nn.Sequential(conv(c4 // 2, c4, 3), nn.Conv2d(c4, out, 1))
        self.lat4 = conv(c4 // 2, c3 // 2, 1)
        self.block3 = nn.Sequential(conv(c3 + c3 // 2, c3 // 2, 1), conv(c3 // 2, c3, 3),
                                    conv(c3, c3 // 2, 1))
        self.pred3 = nn.Sequential(conv(c3 // 2, c3, 3), nn.Conv2d(c3, out, 1))

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        """Raw predictions per stride (8, 16, 32), shaped (B, A, H, W, 5 + C)."""
        f3, f4, f5 = self.backbone(x)
        r5 = self.block5(f5)
        r4 = self.block4(torch.cat([F.interpolate(self.lat5(r5), scale_factor=2.0, mode="nearest"), f4], 1))
        r3 = self.block3(torch.cat([F.interpolate(self.lat4(r4), scale_factor=2.0, mode="nearest"), f3], 1))
        outs = [self.pred3(r3), self.pred4(r4), self.pred5(r5)]
        return [o.view(o.shape[0], NUM_ANCHORS, -1, o.shape[2], o.shape[3]).permute(0, 1, 3, 4, 2)
                for o in outs]


def box_iou_cxcywh(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU between boxes (..., 4) and (M, 4) in (cx, cy, w, h); result (..., M)."""
    a = a[..., None, :]
    lo = np.maximum(a[..., :2] - a[..., 2:] / 2, b[:, :2] - b[:, 2:] / 2)
    hi = np.minimum(a[..., :2] + a[..., 2:] / 2, b[:, :2] + b[:, 2:] / 2)
    inter = np.clip(hi - lo, 0, None).prod(-1)
    union = a[..., 2:].prod(-1) + b[:, 2:].prod(-1) - inter
    return inter / np.maximum(union, 1e-9)


def decode(pred: np.ndarray, anchors: np.ndarray, stride: int) -> np.ndarray:
    """Raw (B, A, H, W, 5+C) outputs -> boxes (B, A, H, W, 4) in pixels (cx, cy, w, h)."""
    _, _, h, w, _ = pred.shape
    gy, gx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    sig = 1.0 / (1.0 + np.exp(-pred[..., :2]))
    cx = (sig[..., 0] + gx) * stride
    cy = (sig[..., 1] + gy) * stride
    wh = np.exp(np.clip(pred[..., 2:4], -10, 10)) * anchors[None, :, None, None, :]
    return np.stack([cx, cy, wh[..., 0], wh[..., 1]], -1)


def assign_targets(preds: Sequence[np.ndarray], gts: Sequence[np.ndarray], anchors: np.ndarray,
                   num_classes: int, ignore_thresh: float = 0.5
                   ) -> Tuple[List[Dict[str, np.ndarray]], List[Tuple[int, int, int, int, int]]]:
    """Build per-scale target arrays from fetched predictions.

    ``gts[b]`` is an (N, 5) array of (class, cx, cy, w, h). The scale comes from
    the anchor shapes (static), but the anchor within the scale is the one whose
    *predicted* box best overlaps the ground truth, and the ignore mask also
    depends on predictions: both are decided by values fetched from the model.
    Returns the targets and the list of (image, scale, anchor, row, col) picks.
    """
    targets, boxes = [], []
    for s, pred in enumerate(preds):
        b, a, h, w, _ = pred.shape
        targets.append({"obj": np.zeros((b, a, h, w), bool), "noobj": np.ones((b, a, h, w), bool),
                        "txy": np.zeros((b, a, h, w, 2), np.float32),
                        "twh": np.zeros((b, a, h, w, 2), np.float32),
                        "tcls": np.zeros((b, a, h, w, num_classes), np.float32)})
        boxes.append(decode(pred, anchors[s * NUM_ANCHORS:(s + 1) * NUM_ANCHORS], STRIDES[s]))
    picks = []
    for img, gt in enumerate(gts):
        if len(gt) == 0:
            continue
        for s in range(len(preds)):
            ignore = box_iou_cxcywh(boxes[s][img], gt[:, 1:]).max(-1) > ignore_thresh
            targets[s]["noobj"][img][ignore] = False
        for cls, cx, cy, bw, bh in gt:
            shape_iou = box_iou_cxcywh(np.array([0, 0, bw, bh]), np.c_[np.zeros((9, 2)), anchors])
            s = int(shape_iou.argmax()) // NUM_ANCHORS
            stride = STRIDES[s]
            grid_h, grid_w = preds[s].shape[2:4]
            gj, gi = min(int(cy // stride), grid_h - 1), min(int(cx // stride), grid_w - 1)
            pred_iou = box_iou_cxcywh(boxes[s][img, :, gj, gi], np.array([[cx, cy, bw, bh]]))[:, 0]
            # Predictions decide; anchor shape only breaks ties (e.g. all IoUs zero).
            a = int((pred_iou + 1e-3 * shape_iou[s * NUM_ANCHORS:(s + 1) * NUM_ANCHORS]).argmax())
            anchor = anchors[s * NUM_ANCHORS + a]
            t = targets[s]
            t["obj"][img, a, gj, gi] = True
            t["noobj"][img, a, gj, gi] = False
            t["txy"][img, a, gj, gi] = (cx / stride - gi, cy / stride - gj)
            t["twh"][img, a, gj, gi] = np.log(np.array([bw, bh]) / anchor + 1e-9)
            t["tcls"][img, a, gj, gi, int(cls)] = 1.0
            picks.append((img, s, a, gj, gi))
    return targets, picks


def yolo_loss(preds: Sequence[torch.Tensor], targets: Sequence[Dict[str, np.ndarray]]) -> torch.Tensor:
    """Sum of box (MSE), objectness and class (BCE) losses over the three scales."""
    device = preds[0].device
    loss = preds[0].new_zeros(())
    for p, t in zip(preds, targets):
        tt = {k: torch.from_numpy(v).to(device) for k, v in t.items()}
        noobj = p[..., 4][tt["noobj"]]
        loss = loss + F.binary_cross_entropy_with_logits(noobj, torch.zeros_like(noobj), reduction="sum")
        if t["obj"].any():  # decided on the host from the NumPy masks
            pos = p[tt["obj"]]
            loss = loss + F.mse_loss(pos[:, :2].sigmoid(), tt["txy"][tt["obj"]], reduction="sum")
            loss = loss + F.mse_loss(pos[:, 2:4], tt["twh"][tt["obj"]], reduction="sum")
            loss = loss + F.binary_cross_entropy_with_logits(pos[:, 4], torch.ones_like(pos[:, 4]),
                                                             reduction="sum")
            loss = loss + F.binary_cross_entropy_with_logits(pos[:, 5:], tt["tcls"][tt["obj"]],
                                                             reduction="sum")
    return loss / preds[0].shape[0]


def make_batches(cfg: YoloConfig, n: int, device: torch.device
                 ) -> List[Tuple[torch.Tensor, List[np.ndarray]]]:
    """Noise images with class-coloured rectangles at the ground-truth boxes."""
    rng = np.random.RandomState(1234)
    colours = rng.uniform(-1, 1, (cfg.num_classes, 3))
    size = cfg.image_size
    batches = []
    for _ in range(n):
        images = rng.normal(0, 0.3, (cfg.batch_size, 3, size, size))
        gts = []
        for img in range(cfg.batch_size):
            rows = []
            for _ in range(rng.randint(1, cfg.max_objects + 1)):
                cls = rng.randint(cfg.num_classes)
                bw, bh = rng.uniform(0.1, 0.6, 2) * size
                cx, cy = rng.uniform(bw / 2, size - bw / 2), rng.uniform(bh / 2, size - bh / 2)
                x0, y0 = int(cx - bw / 2), int(cy - bh / 2)
                images[img, :, y0:int(cy + bh / 2), x0:int(cx + bw / 2)] += colours[cls][:, None, None]
                rows.append((cls, cx, cy, bw, bh))
            gts.append(np.array(rows, dtype=np.float64))
        batches.append((torch.tensor(images, dtype=torch.float32, device=device), gts))
    return batches


class YoloV3Program(Program):
    name = "yolov3"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        cfg = CONFIGS[size]
        seed_everything(seed)
        self.cfg = cfg
        self.anchors = ANCHORS_416 * cfg.image_size / 416.0
        self.model = YoloV3(cfg).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.batches = make_batches(cfg, 4, self.device)
        self.picks: List[List[Tuple[int, int, int, int, int]]] = []  # per step, for tests

    def step(self, i: int) -> torch.Tensor:
        images, gts = cycle(self.batches, i)
        preds = self.model(images)
        fetched = [p.detach().cpu().numpy() for p in preds]  # materialization
        targets, picks = assign_targets(fetched, gts, self.anchors, self.cfg.num_classes)
        self.picks.append(picks)
        loss = yolo_loss(preds, targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> YoloV3Program:
    return YoloV3Program(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
