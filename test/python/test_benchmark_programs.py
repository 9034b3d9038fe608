"""Tests for the benchmark suite (benchmarks/programs) and its harness (benchmarks/run.py).

They check that every program trains eagerly, that each program really
exercises the Python feature it exists for, and that the harness produces its
artifacts and reports modes it cannot run (terra, torch.compile) as
unavailable with a reason. No timing assertions.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Callable, Dict

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import run as bench_run  # noqa: E402
from benchmarks.harness import modes as bench_modes  # noqa: E402
from benchmarks.harness.measure import RunResult, compare  # noqa: E402
from benchmarks.programs import NAMES, PROGRAMS  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(program: Any, steps: int) -> list:
    return [float(program.step(i)) for i in range(steps)]


def _terra_importable() -> bool:
    """Same check as the harness: an installed or in-tree (python/terra) package that
    provides terra.function. Anything else must be reported as unavailable."""
    return bench_modes.probe("terra").available


# ------------------------------------------------------------------ programs


def test_registry_has_the_ten_paper_programs() -> None:
    assert list(PROGRAMS) == list(NAMES)
    assert len(PROGRAMS) == 10
    for name, module in PROGRAMS.items():
        assert callable(module.build), name
        assert module.__name__.endswith("." + name)


@pytest.mark.parametrize("name", NAMES)
def test_program_trains_eagerly(name: str) -> None:
    program = PROGRAMS[name].build(size="small", device="cpu", seed=0)
    assert program.name == name
    before = program.param_snapshot()
    losses = _run(program, 2)
    assert all(math.isfinite(x) for x in losses), losses
    after = program.param_snapshot()
    assert before.keys() == after.keys() and before
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2, f"only {len(changed)}/{len(before)} parameters moved"
    assert len(list(program.parameters())) == len(before)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_replays_identically(name: str) -> None:
    """The harness compares modes step by step, so a rebuilt program must replay exactly."""
    a = _run(PROGRAMS[name].build(seed=3), 2)
    b = _run(PROGRAMS[name].build(seed=3), 2)
    assert a == b


def test_unknown_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown size"):
        PROGRAMS["resnet50"].build(size="medium")


def test_resnet50_full_is_paper_scale() -> None:
    from benchmarks.programs import resnet50

    model = resnet50.ResNet(resnet50.CONFIGS["full"])
    n = sum(p.numel() for p in model.parameters())
    assert 25.0e6 < n < 26.0e6  # torchvision's resnet50 has 25.56M


# ------------------------------------------------------- the Python features


def test_sdpoint_takes_many_random_paths() -> None:
    program = PROGRAMS["sdpoint"].build(seed=0)
    _run(program, 8)
    paths = program.paths_seen
    assert len(paths) == 8
    assert len(set(paths)) >= 3, paths
    point, ratio = paths[-1]
    ratios = [b.downsampling_ratio for b in program.model.blocks]  # the mutation is visible
    assert ratios == [ratio if idx == point else 1.0 for idx in range(len(ratios))]
    other = PROGRAMS["sdpoint"].build(seed=1)
    _run(other, 8)
    assert other.paths_seen != paths  # drawn from the seeded `random` module


def test_gpt2_sees_several_sequence_lengths() -> None:
    program = PROGRAMS["gpt2"].build()
    _run(program, 3)
    assert len(set(program.seq_lens_seen)) == 3
    assert program.seq_lens_seen == [t for t in PROGRAMS["gpt2"].CONFIGS["small"].seq_lens[:3]]


def test_dropblock_probability_ramps_by_mutation() -> None:
    program = PROGRAMS["dropblock"].build()
    _run(program, 4)
    probs = program.drop_probs
    assert probs[0] == 0.0 and all(b > a for a, b in zip(probs, probs[1:])), probs
    assert all(db.drop_prob == probs[-1] for db in program.model.dropblocks)


def test_dropblock_drops_blocks_when_probability_is_set() -> None:
    from benchmarks.programs.dropblock import DropBlock2D

    db = DropBlock2D(0.0, 3).train()
    x = torch.ones(2, 4, 8, 8)
    assert db(x) is x  # probability 0: identity, another Python-decided path
    db.drop_prob = 0.5
    torch.manual_seed(0)
    y = db(x)
    assert (y == 0).any() and y.shape == x.shape


def test_dcgan_logs_python_floats_every_step() -> None:
    program = PROGRAMS["dcgan"].build()
    _run(program, 3)
    assert len(program.log) == 3
    assert all(type(v) is float and math.isfinite(v) for row in program.log for v in row)


def test_bert_cls_computes_host_metric_every_step() -> None:
    program = PROGRAMS["bert_cls"].build()
    _run(program, 3)
    assert len(program.metrics) == 3
    for m in program.metrics:
        assert 0.0 <= m["acc"] <= 1.0 and 0.0 <= m["f1"] <= 1.0
    assert program.metrics[-1]["running_acc"] == pytest.approx(np.mean([m["acc"] for m in program.metrics]))


def test_bert_qa_none_default_arguments() -> None:
    program = PROGRAMS["bert_qa"].build()
    model = program.model.eval()
    ids = program.batches[0]["input_ids"][:2]
    with torch.no_grad():
        out_none = model(ids)  # no mask, no segments, no positions -> logits only
        out_ones = model(ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
    assert len(out_none) == 2
    assert torch.allclose(out_none[0], out_ones[0]) and torch.allclose(out_none[1], out_ones[1])
    masks = ["attention_mask" in b for b in program.batches]
    assert any(masks) and not all(masks)  # training passes both a mask and None


def test_yolov3_anchor_choice_follows_fetched_predictions() -> None:
    from benchmarks.programs.yolov3 import ANCHORS_416, STRIDES, assign_targets

    anchors = ANCHORS_416 * 64 / 416
    preds = [np.zeros((1, 3, 64 // s, 64 // s, 8), np.float32) for s in STRIDES]
    gt = [np.array([[1, 20.0, 20.0, 5.0, 5.0]])]  # small box -> stride-8 scale, cell (2, 2)

    def predict_box(anchor: int) -> list:
        p = [a.copy() for a in preds]
        w, h = anchors[anchor]
        p[0][0, anchor, 2, 2, 2:4] = np.log([5.0 / w, 5.0 / h])  # exact size; centre (20, 20)
        return p

    for anchor in (0, 2):
        targets, picks = assign_targets(predict_box(anchor), gt, anchors, num_classes=3)
        assert picks == [(0, 0, anchor, 2, 2)]
        assert targets[0]["obj"].sum() == 1 and targets[0]["obj"][0, anchor, 2, 2]
        assert targets[0]["tcls"][0, anchor, 2, 2].tolist() == [0.0, 1.0, 0.0]
    program = PROGRAMS["yolov3"].build()
    _run(program, 2)
    assert len(program.picks) == 2 and all(program.picks)


def test_faster_rcnn_numpy_nms_and_variable_proposals() -> None:
    from benchmarks.programs.faster_rcnn import nms

    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30], [0, 0, 9, 10]], float)
    scores = np.array([0.9, 0.8, 0.7, 0.95])
    assert nms(boxes, scores, 0.5, limit=10).tolist() == [3, 2]
    assert nms(boxes, scores, 0.5, limit=1).tolist() == [3]
    program = PROGRAMS["faster_rcnn"].build()
    _run(program, 3)
    counts = program.num_proposals
    cfg = PROGRAMS["faster_rcnn"].CONFIGS["small"]
    assert len(counts) == 3 and all(0 < c <= cfg.post_nms for row in counts for c in row)


def test_music_transformer_schedule_object_mutates_lr() -> None:
    program = PROGRAMS["music_transformer"].build()
    _run(program, 3)
    assert program.schedule._step == 3
    lrs = program.lr_history
    assert len(set(lrs)) == 3 and lrs == sorted(lrs)  # still in warm-up: rising every step
    assert program.optimizer.param_groups[0]["lr"] == lrs[-1]


# ------------------------------------------------------------------- harness


def _check_artifacts(out: Path) -> Dict[str, Any]:
    for name in ("results.json", "results.md", "speedup.png", "step_time.png", "phases.png"):
        assert (out / name).is_file(), name
    for png in ("speedup.png", "step_time.png", "phases.png"):
        assert (out / png).read_bytes()[:8] == PNG_MAGIC
    return json.loads((out / "results.json").read_text())


def test_harness_eager_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = bench_run.main(["--programs", "dcgan,faster_rcnn", "--steps", "2", "--warmup", "1", "--settle", "1",
                         "--repeats", "2", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    doc = _check_artifacts(tmp_path)
    assert doc["programs"] == ["dcgan", "faster_rcnn"]
    assert list(doc["modes"]) == list(bench_modes.MODES)
    by = {(r["program"], r["mode"]): r for r in doc["results"]}
    for prog in ("dcgan", "faster_rcnn"):
        eager = by[(prog, "eager")]
        assert eager["status"] == "ok"
        assert len(eager["samples_s"]) == 2 and eager["step_time_s"]["median"] > 0
        assert eager["step_time_s"]["min"] <= eager["step_time_s"]["median"] <= eager["step_time_s"]["max"]
        assert len(eager["losses"]) == 1 + 1 + 2 * 2 and all(math.isfinite(x) for x in eager["losses"])
        assert eager["speedup"] == 1.0
        if not _terra_importable():
            for mode in ("terra", "terra-serialized"):
                assert by[(prog, mode)]["status"] == "unavailable"
                assert "terra" in by[(prog, mode)]["reason"]
                assert by[(prog, mode)]["reason"] == bench_modes.probe(mode).reason
        if not hasattr(torch, "compile"):
            assert by[(prog, "torch-compile")]["status"] == "unavailable"
            assert "torch.compile" in by[(prog, "torch-compile")]["reason"]
    md = (tmp_path / "results.md").read_text()
    for heading in ("## Modes", "## Step time", "## Speedup vs eager", "## Correctness vs eager",
                    "## Compilation, fallbacks and regenerations", "## Phase breakdown", "## Coverage"):
        assert heading in md
    if not _terra_importable():
        assert f"| terra | no | {bench_modes.probe('terra').reason} |" in md
        assert "| dcgan | ran | unavailable | unavailable |" in md
    assert "## Step time" in capsys.readouterr().out


def test_harness_runs_as_a_script(tmp_path: Path) -> None:
    cmd = [sys.executable, "benchmarks/run.py", "--programs", "resnet50", "--modes", "terra",
           "--steps", "1", "--warmup", "0", "--repeats", "1", "--threads", "1", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = _check_artifacts(tmp_path)
    assert list(doc["modes"]) == ["eager", "terra"]  # eager is always added as the baseline
    assert doc["machine"]["torch_threads"] == 1
    assert "done" in proc.stderr  # the progress bar finished
    if not _terra_importable():
        assert f"mode terra: unavailable: {bench_modes.probe('terra').reason}" in proc.stderr


@pytest.mark.skipif(not _terra_importable(), reason="the terra package is not built")
def test_mlp_sizes_runs_as_a_script() -> None:
    """benchmarks/mlp_sizes.py co-executes the main job's step at its three
    sizes and reports each (a smoke test: the ratios are measurements)."""
    cmd = [sys.executable, "benchmarks/mlp_sizes.py", "--blocks", "1", "--block", "3", "--copy-commit"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if not line.startswith(" ")]
    copied = [line for line in proc.stdout.splitlines() if line.startswith(" ")]
    assert [line.split()[0] for line in lines] == ["tiny", "medium", "wide"], proc.stdout
    assert len(copied) == 3 and all("host copying the new state" in line for line in copied), proc.stdout
    for line in lines:
        assert "x eager" in line and line.endswith("0 fallbacks"), line
        done, _, total = re.search(r"(\d+) of (\d+) timed steps co-executed", line).group(1, 0, 2)
        assert int(done) == int(total) > 0, line


@pytest.mark.skipif(not _terra_importable(), reason="the terra package is not built")
def test_step_lines_runs_as_a_script() -> None:
    """benchmarks/step_lines.py times every top-level statement of DCGAN's
    step in both modes, co-executed (a smoke test: the times are
    measurements)."""
    cmd = [sys.executable, "benchmarks/step_lines.py", "dcgan", "--blocks", "2", "--block", "2",
           "--warmup", "3"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "terra phases {'coexec': 4}" in out, out
    statements = ["real, z = cycle(self.real, i)", "err_real.backward()", "self.optG.step()",
                  "(the call -> the first statement)", "(the last statement run -> the call's return)"]
    for text in statements:
        assert any(text in line and len(line.split()) > 3 for line in out.splitlines()), (text, out)
    assert re.search(r"whole step \(\d+\.\d+x eager\)", out), out


def test_terra_reported_unavailable_when_import_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "terra", None)  # makes `import terra` raise ImportError
    for mode in ("terra", "terra-serialized"):
        info = bench_modes.probe(mode)
        assert not info.available and "import terra" in info.reason
    assert bench_modes.probe("eager").available
    assert bench_modes.probe("torch-compile").available == hasattr(torch, "compile")


class _StandInTerra(types.ModuleType):
    """Test double for the not-yet-built terra package: runs the step eagerly and
    reports fixed stats, so the harness's terra plumbing is exercised end to end."""

    def __init__(self, skew: float = 0.0) -> None:
        super().__init__("terra")
        self.calls: Dict[str, int] = {}
        self.skew = skew  # added to every returned loss, to simulate a wrong result

    def function(self, fn: Callable, serialized: bool = False) -> Callable:
        key = "serialized" if serialized else "concurrent"

        def wrapped(*args: Any) -> Any:
            self.calls[key] = self.calls.get(key, 0) + 1
            return fn(*args) + self.skew

        wrapped.key = key  # type: ignore[attr-defined]
        return wrapped

    def stats(self, fn: Callable) -> Dict[str, Any]:
        n = self.calls[fn.key]  # type: ignore[attr-defined]
        return {"fallbacks": 1, "regenerations": 2, "compile_time_s": 0.25, "host_exec_s": 0.001 * n,
                "host_stall_s": 0.0, "graph_exec_s": 0.003 * n, "graph_stall_s": 0.0005 * n,
                "note": object()}


def test_harness_terra_plumbing_with_stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = _StandInTerra()
    monkeypatch.setitem(sys.modules, "terra", fake)
    rc = bench_run.main(["--programs", "dcgan", "--modes", "eager,terra,terra-serialized", "--steps", "2",
                         "--warmup", "1", "--settle", "0", "--repeats", "1", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    assert fake.calls == {"concurrent": 3, "serialized": 3}
    doc = _check_artifacts(tmp_path)
    by = {(r["program"], r["mode"]): r for r in doc["results"]}
    for mode in ("terra", "terra-serialized"):
        r = by[("dcgan", mode)]
        assert r["status"] == "ok" and r["speedup"] > 0
        assert r["correctness"]["ok"] and r["correctness"]["loss_max_abs"] == 0.0
        # The perturbed-eager noise floor is measured and the mode compared to it.
        assert r["correctness"]["noise_floor_param_rel"] > 0
        assert r["correctness"]["within_noise"] is True
        assert r["terra"]["fallbacks"] == 1 and r["terra"]["compile_time_s"] == 0.25
        assert isinstance(r["terra"]["raw"]["note"], str)
    md = (tmp_path / "results.md").read_text()
    assert "| dcgan | terra | 0." in md  # compilation row present
    assert "| dcgan | terra | 1.00 | 0.00 | 3.00 | 0.50 |" in md  # phases in ms per step


def test_strict_run_fails_when_a_mode_disagrees_with_eager(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "terra", _StandInTerra(skew=0.5))
    argv = ["--programs", "dcgan", "--modes", "terra", "--steps", "1", "--warmup", "1", "--repeats", "1",
            "--out", str(tmp_path), "--no-progress"]
    assert bench_run.main(argv + ["--strict"]) == 1
    doc = json.loads((tmp_path / "results.json").read_text())
    terra = next(r for r in doc["results"] if r["mode"] == "terra")
    assert not terra["correctness"]["ok"]
    assert terra["correctness"]["loss_max_abs"] == pytest.approx(0.5, rel=1e-5)
    assert terra["correctness"]["within_noise"] is False
    assert "ran (mismatch)" in (tmp_path / "results.md").read_text()


def test_results_json_is_strict_even_with_nan(tmp_path: Path) -> None:
    from benchmarks.harness.report import write_json

    write_json({"losses": [1.0, float("nan"), float("inf")]}, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text()) == {"losses": [1.0, None, None]}


def _result(losses: list, params: Dict[str, torch.Tensor]) -> RunResult:
    return RunResult("p", "m", "ok", losses=losses, params=params)


def test_compare_reports_and_flags_divergence() -> None:
    ref = _result([1.0, 0.5], {"w": torch.ones(3)})
    same = compare(ref, _result([1.0, 0.5], {"w": torch.ones(3)}), rtol=1e-3, atol=1e-5)
    assert same["ok"] and same["param_max_abs"] == 0.0
    drift = compare(ref, _result([1.0, 0.5], {"w": torch.tensor([1.0, 1.0, 1.02])}), rtol=1e-3, atol=1e-5)
    assert not drift["ok"] and drift["param_max_abs"] == pytest.approx(0.02, rel=1e-4)
    assert drift["param_max_rel"] == pytest.approx(0.02, rel=1e-4)
    nan = compare(ref, _result([1.0, float("nan")], {"w": torch.ones(3)}), rtol=1e-3, atol=1e-5)
    assert not nan["ok"]
    short = compare(ref, _result([1.0], {"w": torch.ones(3)}), rtol=1e-3, atol=1e-5)
    assert not short["ok"]


def test_cli_rejects_unknown_names() -> None:
    with pytest.raises(SystemExit):
        bench_run.parse_args(["--programs", "resnet50,alexnet"])
    with pytest.raises(SystemExit):
        bench_run.parse_args(["--modes", "xla"])
    args = bench_run.parse_args(["--modes", "torch-compile,eager"])
    assert args.modes == ["eager", "torch-compile"]
