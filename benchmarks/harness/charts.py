"""PNG charts (matplotlib, Agg backend): speedups, step times and terra phases.

Missing values (a mode that was unavailable or failed) are drawn as an "n/a"
label on the axis instead of a bar, so a chart never implies a measurement
that was not taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .modes import PHASES  # noqa: E402
from .report import phase_ms  # noqa: E402

PHASE_LABELS = {"host_exec_s": "host exec", "host_stall_s": "host stall", "graph_exec_s": "graph exec",
                "graph_stall_s": "graph stall"}


def _grouped_bars(ax: Any, programs: List[str], modes: List[str],
                  values: Dict[str, List[Optional[float]]], errors: Optional[Dict[str, Any]] = None) -> None:
    width = 0.8 / max(len(modes), 1)
    handles = []
    for k, mode in enumerate(modes):
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(programs))]
        for x, v in zip(xs, values[mode]):
            if v is None:
                ax.text(x, 0, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color="grey")
        present = [(x, v, i) for i, (x, v) in enumerate(zip(xs, values[mode])) if v is not None]
        if present:
            yerr = None
            if errors is not None:
                lo = [errors[mode][i][0] for _, _, i in present]
                hi = [errors[mode][i][1] for _, _, i in present]
                yerr = [lo, hi]
            ax.bar([x for x, _, _ in present], [v for _, v, _ in present], width, yerr=yerr,
                   capsize=2, color=f"C{k}")
            handles.append(Patch(facecolor=f"C{k}", label=mode))
        else:
            handles.append(Patch(facecolor="white", edgecolor=f"C{k}", hatch="//", label=f"{mode} (n/a)"))
    ax.set_xticks(range(len(programs)))
    ax.set_xticklabels(programs, rotation=30, ha="right")
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _ok(idx: Dict[tuple, Dict[str, Any]], p: str, m: str) -> Optional[Dict[str, Any]]:
    r = idx.get((p, m))
    return r if r is not None and r["status"] == "ok" else None


def speedup_chart(doc: Dict[str, Any], path: Path) -> None:
    idx = {(r["program"], r["mode"]): r for r in doc["results"]}
    programs, modes = doc["programs"], list(doc["modes"])
    values = {m: [(_ok(idx, p, m) or {}).get("speedup") for p in programs] for m in modes}
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(programs) + 2), 4.5))
    _grouped_bars(ax, programs, modes, values)
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_ylabel("speedup vs eager (x)")
    ax.set_title(f"Speedup vs eager ({doc['config']['size']}, {doc['config']['device']})")
    _footnote(fig, doc)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def step_time_chart(doc: Dict[str, Any], path: Path) -> None:
    idx = {(r["program"], r["mode"]): r for r in doc["results"]}
    programs, modes = doc["programs"], list(doc["modes"])
    values, errors = {}, {}
    for m in modes:
        vals, errs = [], []
        for p in programs:
            r = _ok(idx, p, m)
            if r is None:
                vals.append(None)
                errs.append((0.0, 0.0))
            else:
                t = r["step_time_s"]
                vals.append(t["median"] * 1e3)
                errs.append(((t["median"] - t["min"]) * 1e3, (t["max"] - t["median"]) * 1e3))
        values[m], errors[m] = vals, errs
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(programs) + 2), 4.5))
    _grouped_bars(ax, programs, modes, values, errors)
    ax.set_ylabel("ms per step (median, min-max)")
    ax.set_title(f"Step time ({doc['config']['size']}, {doc['config']['device']})")
    _footnote(fig, doc)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def phase_chart(doc: Dict[str, Any], path: Path) -> None:
    """Stacked host/graph exec and stall per (program, terra mode), or an explicit n/a panel."""
    bars = [(f"{r['program']}\n{r['mode']}", phase_ms(r)) for r in doc["results"]
            if r["status"] == "ok" and r.get("terra")]
    bars = [(label, ph) for label, ph in bars if any(v is not None for v in ph.values())]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(bars) + 2), 4.5))
    if not bars:
        reasons = [f"{m}: {v['reason']}" for m, v in doc["modes"].items()
                   if m.startswith("terra") and not v["available"]]
        text = "n/a: no terra phase data\n" + ("\n".join(_wrap(r) for r in reasons) or
                                               "(terra ran but reported no phase times)")
        ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, transform=ax.transAxes)
        ax.set_axis_off()
    else:
        bottom = [0.0] * len(bars)
        for phase in PHASES:
            vals = [ph[phase] or 0.0 for _, ph in bars]
            ax.bar(range(len(bars)), vals, bottom=bottom, label=PHASE_LABELS[phase])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([label for label, _ in bars], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("ms per step")
        ax.legend(fontsize=8)
    ax.set_title("terra phase breakdown (host = PythonRunner, graph = GraphRunner)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _wrap(text: str, width: int = 90) -> str:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return "\n".join(lines + [cur])


def _footnote(fig: Any, doc: Dict[str, Any]) -> None:
    missing = [m for m, v in doc["modes"].items() if not v["available"]]
    if missing:
        fig.text(0.01, 0.01, "n/a = unavailable: " + ", ".join(missing), fontsize=7, color="grey")


def write_all(doc: Dict[str, Any], out: Path) -> List[Path]:
    paths = [out / "speedup.png", out / "step_time.png", out / "phases.png"]
    speedup_chart(doc, paths[0])
    step_time_chart(doc, paths[1])
    phase_chart(doc, paths[2])
    return paths
