"""The main job: a real PyTorch training program under @terra.function.

Trains a small MLP classifier with SGD + momentum on a synthetic dataset
whose last batch is smaller, logging the loss every 10 steps from Python,
once eagerly and once with `@terra.function` from the same seed. Reports
the per-epoch time of both, terra's phases (tracing, co-execution,
fallbacks, regenerations, compile time, host/graph exec and stall time)
and whether every parameter matches eager. Epoch 0 includes tracing and
the (background) compilation. The step function is ordinary
PyTorch: nothing in it knows about terra.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import terra  # noqa: E402

EPOCHS = 3
BATCH = 64


def build(width_in: int = 32, hidden: int = 128):
    """The model and its training step (benchmarks/mlp_sizes.py builds it
    wider)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    counter = {"step": 0}

    def train_step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        counter["step"] += 1
        if counter["step"] % 10 == 0:
            print(f"  step {counter['step']:3d}  loss {loss.item():.4f}")
        return loss
    return model, train_step


def data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1000, 32, generator=g)
    y = (x[:, :10].argmax(1) + (x[:, 10] > 1).long()) % 10
    return [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x), BATCH)]


def run(step, batches, label):
    times = []
    for epoch in range(EPOCHS):
        print(f"{label} epoch {epoch}")
        start = time.perf_counter()
        for x, y in batches:
            step(x, y)
        # terra compiles the graph in the background while the first
        # epoch's remaining steps run eagerly; this demo is short enough to
        # end before the compiler does, so epoch 0 waits for it (its time
        # includes tracing and compilation) and the later epochs co-execute.
        wait_compiled = getattr(step, "wait_compiled", None)
        if wait_compiled is not None:
            wait_compiled()
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    batches = data()
    model_e, step_e = build()
    model_t, step_t = build()
    # The last batch of each epoch is smaller: with dynamic_batch the batch
    # dim is dynamic from the first trace, so that costs no fallback.
    fn = terra.function(step_t, dynamic_batch=True)
    t_eager = run(step_e, batches, "eager")
    t_terra = run(fn, batches, "terra")
    same = all(torch.allclose(a, b, rtol=1e-4, atol=1e-5)
               for a, b in zip(model_e.parameters(), model_t.parameters()))
    s = terra.stats(fn)
    print("\n== result ==")
    print(f"parameters match eager after {EPOCHS} epochs: {same}")
    print(f"epoch time  eager: {' '.join(f'{t * 1e3:.0f}ms' for t in t_eager)}")
    print(f"            terra: {' '.join(f'{t * 1e3:.0f}ms' for t in t_terra)}")
    print(f"last-epoch speedup over eager: {t_eager[-1] / t_terra[-1]:.2f}x")
    print(f"phases: {s['tracing_iterations']} traced, {s['coexec_iterations']} co-executed "
          f"({s['replayed_iterations']} replayed from a tape), "
          f"{s['eager_iterations']} eager; {s['fallbacks']} fallbacks, {s['regenerations']} regenerations, "
          f"compile {s['compile_time_s']:.2f}s")
    for f in s["fallback_log"]:
        print(f"  fallback at iteration {f['iteration']}: {f['reason']} ({f['site']})")
    print(f"time: host exec {s['host_exec_s']:.3f}s, host stall {s['host_stall_s']:.3f}s, "
          f"graph exec {s['graph_exec_s']:.3f}s, graph stall {s['graph_stall_s']:.3f}s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
