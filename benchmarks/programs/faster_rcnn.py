"""A small two-stage detector in the Faster R-CNN mould (after Viredery/tf-eager-fasterrcnn).

Python feature kept: materialization with data-dependent shapes. The RPN's
scores and box deltas are fetched to NumPy each step; proposals are decoded,
clipped, filtered by NMS and matched to ground truth in NumPy, and the surviving
(variable-length) RoI list is fed back as a tensor for RoI pooling and the
second-stage head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything
from ._nn import conv_bn


@dataclass(frozen=True)
class RCNNConfig:
    image_size: int
    batch_size: int
    num_classes: int  # foreground classes; class 0 is background
    widths: Tuple[int, ...]  # one stride-2 stage each; stride = 2 ** len(widths)
    anchor_sizes: Tuple[int, ...]
    anchor_ratios: Tuple[float, ...]
    rpn_batch: int  # sampled anchors per image
    pre_nms: int
    post_nms: int
    roi_batch: int  # sampled RoIs per image
    pool: int
    fc: int
    max_objects: int


CONFIGS = {
    "small": RCNNConfig(image_size=64, batch_size=2, num_classes=3, widths=(16, 32, 32),
                        anchor_sizes=(16, 32), anchor_ratios=(0.5, 1.0, 2.0), rpn_batch=64,
                        pre_nms=150, post_nms=32, roi_batch=32, pool=4, fc=64, max_objects=3),
    "full": RCNNConfig(image_size=512, batch_size=2, num_classes=20, widths=(64, 128, 256, 512),
                       anchor_sizes=(32, 64, 128, 256), anchor_ratios=(0.5, 1.0, 2.0), rpn_batch=256,
                       pre_nms=2000, post_nms=512, roi_batch=256, pool=7, fc=1024, max_objects=8),
}

# ----------------------------------------------------------------- NumPy box ops


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of (N, 4) and (M, 4) boxes in (x1, y1, x2, y2)."""
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(hi - lo, 0, None).prod(-1)
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    return inter / np.maximum(area(a)[:, None] + area(b)[None] - inter, 1e-9)


def nms(boxes: np.ndarray, scores: np.ndarray, thresh: float, limit: int) -> np.ndarray:
    """Greedy non-maximum suppression; indices of kept boxes, best first."""
    order = scores.argsort()[::-1]
    keep: List[int] = []
    while order.size and len(keep) < limit:
        best = order[0]
        keep.append(int(best))
        rest = order[1:]
        order = rest[box_iou(boxes[best:best + 1], boxes[rest])[0] <= thresh]
    return np.array(keep, dtype=np.int64)


def encode(boxes: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Regression targets (dx, dy, dw, dh) from ``boxes`` to matched ``gt``."""
    wh, gwh = boxes[:, 2:] - boxes[:, :2], gt[:, 2:] - gt[:, :2]
    ctr, gctr = boxes[:, :2] + wh / 2, gt[:, :2] + gwh / 2
    return np.concatenate([(gctr - ctr) / wh, np.log(gwh / wh)], 1).astype(np.float32)


def decode(boxes: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    wh = boxes[..., 2:] - boxes[..., :2]
    ctr = boxes[..., :2] + wh / 2 + deltas[..., :2] * wh
    size = wh * np.exp(np.clip(deltas[..., 2:], -4.0, 4.0))
    return np.concatenate([ctr - size / 2, ctr + size / 2], -1)


def make_anchors(cfg: RCNNConfig) -> np.ndarray:
    """(H * W * A, 4) anchors, ordered cell-major to match the RPN output layout."""
    stride = 2 ** len(cfg.widths)
    side = cfg.image_size // stride
    shapes = np.array([(s / np.sqrt(r), s * np.sqrt(r)) for s in cfg.anchor_sizes
                       for r in cfg.anchor_ratios])
    ys, xs = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    ctr = (np.stack([xs, ys], -1).reshape(-1, 1, 2) + 0.5) * stride
    return np.concatenate([ctr - shapes / 2, ctr + shapes / 2], -1).reshape(-1, 4)


# ----------------------------------------------------------------------- model


class FasterRCNN(nn.Module):
    def __init__(self, cfg: RCNNConfig) -> None:
        super().__init__()
        layers: List[nn.Module] = []
        cin = 3
        for w in cfg.widths:
            layers += [conv_bn(cin, w, 3, 2), conv_bn(w, w, 3)]
            cin = w
        self.backbone = nn.Sequential(*layers)
        a = len(cfg.anchor_sizes) * len(cfg.anchor_ratios)
        self.num_anchors = a
        self.rpn_conv = nn.Conv2d(cin, cin, 3, padding=1)
        self.rpn_cls = nn.Conv2d(cin, a, 1)
        self.rpn_reg = nn.Conv2d(cin, 4 * a, 1)
        self.box_head = nn.Sequential(nn.Flatten(), nn.Linear(cin * cfg.pool**2, cfg.fc), nn.ReLU(True),
                                      nn.Linear(cfg.fc, cfg.fc), nn.ReLU(True))
        self.cls_score = nn.Linear(cfg.fc, cfg.num_classes + 1)
        self.bbox_pred = nn.Linear(cfg.fc, 4)  # class-agnostic regression

    def rpn(self, feat: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Objectness (B, H*W*A) and deltas (B, H*W*A, 4)."""
        h = F.relu(self.rpn_conv(feat))
        b, _, hh, ww = h.shape
        logits = self.rpn_cls(h).permute(0, 2, 3, 1).reshape(b, -1)
        deltas = self.rpn_reg(h).view(b, self.num_anchors, 4, hh, ww).permute(0, 3, 4, 1, 2)
        return logits, deltas.reshape(b, -1, 4)

    def roi_head(self, feat: torch.Tensor, rois: torch.Tensor, pool: int, image_size: int
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
        """RoIAlign-style bilinear pooling via ``affine_grid``/``grid_sample``, then the head."""
        x1, y1, x2, y2 = (rois[:, 1:] / image_size).unbind(1)
        zero = torch.zeros_like(x1)
        theta = torch.stack([torch.stack([x2 - x1, zero, x1 + x2 - 1], 1),
                             torch.stack([zero, y2 - y1, y1 + y2 - 1], 1)], 1)
        grid = F.affine_grid(theta, [rois.shape[0], feat.shape[1], pool, pool], align_corners=False)
        pooled = F.grid_sample(feat[rois[:, 0].long()], grid, align_corners=False)
        h = self.box_head(pooled)
        return self.cls_score(h), self.bbox_pred(h)


# ------------------------------------------------------------------------ data


def make_batches(cfg: RCNNConfig, n: int, device: torch.device
                 ) -> List[Tuple[torch.Tensor, List[np.ndarray]]]:
    """Noise images with class-coloured rectangles; gts[b] rows are (cls, x1, y1, x2, y2)."""
    rng = np.random.RandomState(4321)
    colours = rng.uniform(-1, 1, (cfg.num_classes, 3))
    size = cfg.image_size
    out = []
    for _ in range(n):
        images = rng.normal(0, 0.3, (cfg.batch_size, 3, size, size))
        gts = []
        for img in range(cfg.batch_size):
            rows = []
            for _ in range(rng.randint(1, cfg.max_objects + 1)):
                cls = rng.randint(cfg.num_classes)
                w, h = rng.uniform(0.2, 0.6, 2) * size
                x1, y1 = rng.uniform(0, size - w), rng.uniform(0, size - h)
                images[img, :, int(y1):int(y1 + h), int(x1):int(x1 + w)] += colours[cls][:, None, None]
                rows.append((cls, x1, y1, x1 + w, y1 + h))
            gts.append(np.array(rows))
        out.append((torch.tensor(images, dtype=torch.float32, device=device), gts))
    return out


def rpn_targets(anchors: np.ndarray, gt: np.ndarray, batch: int, rng: np.random.RandomState
                ) -> Tuple[np.ndarray, np.ndarray]:
    """Anchor labels (1 fg, 0 bg, -1 ignored) and deltas; these depend only on the data."""
    iou = box_iou(anchors, gt[:, 1:])
    best = iou.max(1)
    labels = np.full(len(anchors), -1, np.int64)
    labels[best < 0.3] = 0
    labels[best >= 0.7] = 1
    labels[iou.argmax(0)] = 1
    pos, neg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    if len(pos) > batch // 2:
        labels[rng.choice(pos, len(pos) - batch // 2, replace=False)] = -1
    n_neg = batch - min(len(pos), batch // 2)
    if len(neg) > n_neg:
        labels[rng.choice(neg, len(neg) - n_neg, replace=False)] = -1
    return labels, encode(anchors, gt[iou.argmax(1), 1:])


# --------------------------------------------------------------------- program


class FasterRCNNProgram(Program):
    name = "faster_rcnn"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        self.cfg = cfg = CONFIGS[size]
        seed_everything(seed)
        self.rng = np.random.RandomState(seed)  # RoI sampling on the host
        self.model = FasterRCNN(cfg).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9,
                                         weight_decay=1e-4)
        self.anchors = make_anchors(cfg)
        self.batches = []
        for images, gts in make_batches(cfg, 4, self.device):
            targets = [rpn_targets(self.anchors, gt, cfg.rpn_batch, self.rng) for gt in gts]
            labels = torch.tensor(np.stack([t[0] for t in targets]), device=self.device)
            deltas = torch.tensor(np.stack([t[1] for t in targets]), device=self.device)
            self.batches.append((images, gts, labels, deltas))
        self.num_proposals: List[List[int]] = []  # post-NMS proposals per image, per step

    def sample_rois(self, boxes: np.ndarray, scores: np.ndarray, gts: List[np.ndarray]
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Host-side proposal filtering (top-k, clip, NMS) and RoI sampling/matching."""
        cfg, size = self.cfg, self.cfg.image_size
        rois, labels, targets, counts = [], [], [], []
        for b, gt in enumerate(gts):
            top = scores[b].argsort()[::-1][:cfg.pre_nms]
            props = np.clip(boxes[b][top], 0, size)
            ok = ((props[:, 2] - props[:, 0]) > 2) & ((props[:, 3] - props[:, 1]) > 2)
            props, prop_scores = props[ok], scores[b][top][ok]
            props = props[nms(props, prop_scores, 0.7, cfg.post_nms)]
            counts.append(len(props))
            props = np.concatenate([props, gt[:, 1:]])  # ground truth is always a proposal
            iou = box_iou(props, gt[:, 1:])
            match, best = iou.argmax(1), iou.max(1)
            pos, neg = np.flatnonzero(best >= 0.5), np.flatnonzero(best < 0.5)
            pos = self.rng.permutation(pos)[:cfg.roi_batch // 4]
            neg = self.rng.permutation(neg)[:cfg.roi_batch - len(pos)]
            keep = np.concatenate([pos, neg])
            cls = np.where(best[keep] >= 0.5, gt[match[keep], 0] + 1, 0).astype(np.int64)
            rois.append(np.c_[np.full(len(keep), b), props[keep]])
            labels.append(cls)
            targets.append(encode(props[keep], gt[match[keep], 1:]))
        self.num_proposals.append(counts)
        return np.concatenate(rois).astype(np.float32), np.concatenate(labels), np.concatenate(targets)

    def step(self, i: int) -> torch.Tensor:
        images, gts, rpn_labels, rpn_deltas = cycle(self.batches, i)
        feat = self.model.backbone(images)
        logits, deltas = self.model.rpn(feat)
        valid, fg = rpn_labels >= 0, rpn_labels == 1
        rpn_loss = (F.binary_cross_entropy_with_logits(logits[valid], fg[valid].float())
                    + F.smooth_l1_loss(deltas[fg], rpn_deltas[fg], beta=1 / 9))
        # Materialize RPN outputs, filter proposals in NumPy, feed RoIs back.
        boxes = decode(self.anchors[None], deltas.detach().cpu().numpy())
        rois, labels, targets = self.sample_rois(boxes, logits.detach().cpu().numpy(), gts)
        rois_t = torch.from_numpy(rois).to(self.device)
        labels_t = torch.from_numpy(labels).to(self.device)
        cls_logits, box_deltas = self.model.roi_head(feat, rois_t, self.cfg.pool, self.cfg.image_size)
        roi_loss = F.cross_entropy(cls_logits, labels_t)
        is_fg = labels > 0
        if is_fg.any():
            fg_idx = torch.from_numpy(np.flatnonzero(is_fg)).to(self.device)
            roi_loss = roi_loss + F.smooth_l1_loss(box_deltas[fg_idx],
                                                   torch.from_numpy(targets[is_fg]).to(self.device))
        loss = rpn_loss + roi_loss
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> FasterRCNNProgram:
    return FasterRCNNProgram(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
