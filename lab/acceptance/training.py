#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The training issue's acceptance rows, computed from one run-training-comparison.sh folder.

Reads, from OUT_DIR: gpucmp_training*.json (gpucmp's typed rows: items and seconds),
torch_training*.json, verify_<precision>.json and verify_<precision>_conditioned.json
(compare_pytorch.py: random init, and the zero-init residual start), example_losses.json,
largest_batch.txt, projection.csv (gpucmp-report's projections) and alternate/pair*/ (AMP FP16,
gpucmp and PyTorch in alternating pairs: where present, the AMP FP16 / PyTorch AMP eager rows are
the median pair's ratio, since PyTorch's rate moves between processes). Writes into OUT_DIR:
  acceptance.json, summary.md   one row per acceptance row: {row, measured, target, unit, pass}
  training_vs_pytorch.md        images/s side by side, gpucmp eager and graph, PyTorch's modes
  alternating_pairs.md          each pair's AMP FP16 rates and ratio, per batch
  training_table.md             the seed-style table: this GPU measured, A100, L20 and L40S
                                projected, MLPerf Training v4.0's per-GPU rates beside them
gpucmp's rate is its graph row (the whole step in one CUDA graph), its method; eager rows are
in the side-by-side table.
Usage: acceptance.py REPO_ROOT OUT_DIR
"""
import csv
import json
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # acceptance_rows
sys.path.insert(0, os.path.join(here, "..", "..", "python"))  # gpucmp_results, the one reader of gpucmp's files
import gpucmp_results  # noqa: E402
from acceptance_rows import Rows  # noqa: E402

# MLPerf Training v4.0, ResNet-50, per GPU (MXNet, fused kernels, DALI input pipeline),
# ../shared/reference/h200-peers.md and published-results.md.
MLPERF_V40 = {"H200": 7950, "H100 SXM": 7162, "A100": 3398, "L40S": 1854}
PROJECTED = [("a100_80gb_sxm", "A100 80GB SXM", "A100"), ("l20", "L20", None), ("l40s", "L40S", "L40S")]
BATCHES = (64, 128, 256)
RESULTS_PAGE = os.path.join("docs", "results", "h200-training.md")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def gpucmp_rates(path):
    """{benchmark: images/s} from the typed rows (median over repetitions)."""
    rates = {}
    for bench, rows in gpucmp_results.load(path).by_benchmark().items():
        ok = sorted(r.seconds for r in rows if r.ok)
        if ok and rows[0].items:
            rates[bench] = rows[0].items / ok[len(ok) // 2]
    return rates


def alternating_pairs(out):
    """{batch: [(gpucmp graph img/s, PyTorch AMP eager img/s), ...]}, one entry per complete pair."""
    pairs = {}
    folder = os.path.join(out, "alternate")
    if not os.path.isdir(folder):
        return pairs
    for name in sorted(os.listdir(folder), key=lambda n: int(re.sub(r"\D", "", n) or 0)):
        mine, theirs = os.path.join(folder, name, "gpucmp_training_amp_fp16.json"), os.path.join(folder, name, "torch_training_amp_fp16.json")
        if not (os.path.exists(mine) and os.path.exists(theirs)):
            continue
        ours = gpucmp_rates(mine)
        torch_rows = {r["key"]: r["images_per_s"] for r in load_json(theirs)["rows"]}
        for b in BATCHES:
            g, t = ours.get(f"train/resnet50/amp_fp16/bs{b}/graph"), torch_rows.get(f"train/resnet50/amp_fp16/bs{b}/eager")
            if g and t:
                pairs.setdefault(b, []).append((g, t))
    return pairs


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def write_pairs(out, pairs):
    lines = ["| batch | pair | gpucmp graph img/s | PyTorch AMP eager img/s | ratio |", "|---|---|---|---|---|"]
    for b, values in sorted(pairs.items()):
        for i, (g, t) in enumerate(values, 1):
            lines.append(f"| {b} | {i} | {g:,.0f} | {t:,.0f} | {g / t:.3f}× |")
        lines.append(f"| {b} | median | | | **{median([g / t for g, t in values]):.3f}×** |")
    with open(os.path.join(out, "alternating_pairs.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, out = sys.argv[1], sys.argv[2]
    rows = Rows()
    ours, torch_rows = {}, {}
    for name in sorted(os.listdir(out)):
        if name.startswith("gpucmp_training") and name.endswith(".json"):
            ours.update(gpucmp_rates(os.path.join(out, name)))
        elif name.startswith("torch_training") and name.endswith(".json"):
            torch_rows.update({r["key"]: r["images_per_s"] for r in load_json(os.path.join(out, name))["rows"]})

    def g(precision, batch, mode="graph"):
        return ours.get(f"train/resnet50/{precision}/bs{batch}/{mode}")

    def t(precision, batch, mode):
        return torch_rows.get(f"train/resnet50/{precision}/bs{batch}/{mode}")

    def ratio_row(name, mine, theirs, target):
        if mine is None or theirs is None:
            rows.add(name, "missing", f">= {target}", "x", False)
        else:
            rows.add(name, round(mine / theirs, 3), f">= {target}", "x", mine / theirs >= target)

    pairs = alternating_pairs(out)
    if pairs:
        write_pairs(out, pairs)
    for b in BATCHES:
        if b in pairs:
            ratios = [mine / theirs for mine, theirs in pairs[b]]
            m = median(ratios)
            rows.add(f"AMP FP16 bs{b}: gpucmp graph / PyTorch AMP eager + GradScaler (median of {len(ratios)} alternating pairs, "
                     f"range {min(ratios):.3f}-{max(ratios):.3f})", round(m, 3), ">= 1.4", "x", m >= 1.4)
        else:
            ratio_row(f"AMP FP16 bs{b}: gpucmp graph / PyTorch AMP eager + GradScaler", g("amp_fp16", b), t("amp_fp16", b, "eager"), 1.4)
        best_bf16 = max([v for v in (t("bf16", b, "eager"), t("bf16", b, "graph")) if v is not None], default=None)
        ratio_row(f"AMP FP16 bs{b}: gpucmp graph / PyTorch's best BF16 (eager, CUDA graph)", g("amp_fp16", b), best_bf16, 1.25)
    reach = g("amp_fp16", 256)
    rows.add("AMP FP16 bs256 reach (MLPerf Training v4.0 H200: 7,950 img/s per GPU, input pipeline included)",
             round(reach) if reach else "missing", ">= 8000", "img/s", bool(reach and reach >= 8000))
    for b in BATCHES:
        ratio_row(f"TF32 bs{b}: gpucmp graph / PyTorch TF32 eager", g("tf32", b), t("tf32", b, "eager"), 1.2)
        ratio_row(f"BF16 bs{b}: gpucmp graph / PyTorch BF16 CUDA graph", g("bf16", b), t("bf16", b, "graph"), 1.25)

    # Verification against PyTorch autograd (compare_pytorch.py), per precision, two runs each:
    # the benchmark's ResNet-50 at random initialisation, where the precision's cost depends on
    # the network's conditioning, is held to PyTorch's own accuracy; the well-conditioned start
    # (zero-init residual γ) is held to the bounds.
    for precision in ("fp32", "amp_fp16", "tf32", "bf16"):
        documented = "" if precision in ("fp32", "amp_fp16") else " (documented bound)"
        name = f"{precision}, random init: gradients and weights after one step no less accurate than PyTorch {precision} (vs FP64)"
        path = os.path.join(out, f"verify_{precision}.json")
        if os.path.exists(path):
            v = load_json(path)
            worse = v["less_accurate_than_torch"]
            rows.add(name, len(worse), f"== 0 (each within {v['bounds']['as_torch_factor']:g}x PyTorch's error or the bound)",
                     "tensors", not worse)
        else:
            rows.add(name, "missing", "== 0", "tensors", False)
        path = os.path.join(out, f"verify_{precision}_conditioned.json")
        conditioned = f"{precision}, zero-init residual start"
        if not os.path.exists(path):
            rows.add(f"{conditioned}: gradients, one-step updates and 50-step loss curve vs PyTorch FP64{documented}", "missing", "run", "",
                     False)
            continue
        v = load_json(path)
        mine, bounds = v["gpucmp_vs_fp64"], v["bounds"]
        rows.add(f"{conditioned}: worst parameter gradient vs PyTorch FP64{documented}", f"{mine['gradient_max']:.2e}",
                 f"<= {bounds['gradient_and_weight']:g}", "relative", mine["gradient_max"] <= bounds["gradient_and_weight"])
        rows.add(f"{conditioned}: worst parameter after one step vs PyTorch FP64{documented}",
                 f"{mine['weights_max']:.2e}", f"<= {bounds['gradient_and_weight']:g}", "relative",
                 mine["weights_max"] <= bounds["gradient_and_weight"])
        rows.add(f"{conditioned}: 50-step loss curve, worst step vs PyTorch FP64{documented}", f"{mine['loss_curve_max']:.2e}",
                 f"<= {bounds['loss_curve']:g}", "relative", mine["loss_curve_max"] <= bounds["loss_curve"])

    # The user network trains.
    path = os.path.join(out, "example_losses.json")
    if os.path.exists(path):
        losses = load_json(path)["losses"]
        rows.add("user network (examples/09_train_custom_cnn): final / initial loss on a teacher's labels",
                 round(losses[-1] / losses[0], 3), "<= 0.5", "x", losses[-1] <= 0.5 * losses[0])
    else:
        rows.add("user network (examples/09_train_custom_cnn): final / initial loss on a teacher's labels", "missing", "<= 0.5", "x", False)

    # The largest batch.
    path = os.path.join(out, "largest_batch.txt")
    if os.path.exists(path):
        m = re.search(r"largest batch .*?: (\d+) \((built and verified)", open(path).read())
        rows.add("largest AMP FP16 batch that fits, found by search and built", int(m.group(1)) if m else "missing", "built", "images",
                 bool(m))
    else:
        rows.add("largest AMP FP16 batch that fits, found by search and built", "missing", "built", "images", False)

    # The seed-style table.
    table = seed_table(out, ours)
    if table:
        with open(os.path.join(out, "training_table.md"), "w") as f:
            f.write(table)
    # The measured results page (docs/results/), where each run's tables go.
    page = os.path.join(root, RESULTS_PAGE)
    docs = open(page).read() if os.path.exists(page) else ""
    first_row = table.splitlines()[2] if table else None
    rows.add(f"seed-style training table (H200 measured; A100, L20, L40S projected; MLPerf beside) in {RESULTS_PAGE}",
             "in docs" if first_row and first_row in docs else "not in docs", "in docs", "", bool(first_row and first_row in docs))

    # Host tests in CI.
    host = {"loss-scale state machine": ("tests/unit/training_test.cpp", "[loss_scale]"),
            "ResNet-50 training FLOPs": ("tests/unit/training_test.cpp", "[training][work]"),
            "memory plan": ("tests/unit/training_memory_test.cpp", "[training][memory]"),
            "finite differences": ("tests/unit/reference_layers_test.cpp", "finite")}
    found = [k for k, (f, tag) in host.items() if os.path.exists(os.path.join(root, f)) and tag in open(os.path.join(root, f)).read()]
    rows.add("host tests in CI: " + ", ".join(host), f"{len(found)} of {len(host)}", "all", "", len(found) == len(host))

    side_by_side(out, ours, torch_rows)
    rows.write(out)
    return 0 if all(r["pass"] for r in rows.rows) else 1


def side_by_side(out, ours, torch_rows):
    lines = ["| precision | batch | gpucmp eager | gpucmp graph | PyTorch eager | PyTorch graph | gpucmp graph / PyTorch eager |",
             "|---|---|---|---|---|---|---|"]
    for precision in ("amp_fp16", "bf16", "tf32"):
        for b in BATCHES:
            ge, gg = ours.get(f"train/resnet50/{precision}/bs{b}/eager"), ours.get(f"train/resnet50/{precision}/bs{b}/graph")
            te, tg = torch_rows.get(f"train/resnet50/{precision}/bs{b}/eager"), torch_rows.get(f"train/resnet50/{precision}/bs{b}/graph")
            if not any((ge, gg, te, tg)):
                continue
            cell = lambda v: f"{v:,.0f}" if v else "–"  # noqa: E731
            lines.append(f"| {precision} | {b} | {cell(ge)} | {cell(gg)} | {cell(te)} | {cell(tg)} | "
                         f"{(gg / te):.2f}× |" if gg and te else f"| {precision} | {b} | {cell(ge)} | {cell(gg)} | {cell(te)} | {cell(tg)} | – |")
    with open(os.path.join(out, "training_vs_pytorch.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def seed_table(out, ours):
    """The articles' table done correctly: images/s per GPU for ResNet-50 training, batch 256."""
    path = os.path.join(out, "projection.csv")
    projected = {}
    if os.path.exists(path):
        with open(path) as f:
            for r in csv.DictReader(f):
                if r["kind"] == "projected" and r["seconds"]:
                    projected[(r["benchmark"], r["gpu_key"])] = float(r["seconds"])
    precisions = [("amp_fp16", "AMP FP16"), ("bf16", "BF16"), ("tf32", "TF32")]
    head = "| GPU | how | " + " | ".join(f"{label} bs256 img/s" for _, label in precisions) + " | MLPerf Training v4.0 per GPU |"
    lines = [head, "|" + "---|" * (3 + len(precisions))]
    cells = []
    for p, _ in precisions:
        v = ours.get(f"train/resnet50/{p}/bs256/graph")
        cells.append(f"{v:,.0f}" if v else "–")
    if all(c == "–" for c in cells):
        return ""
    lines.append(f"| H200 | measured (gpucmp, whole step in a CUDA graph) | " + " | ".join(cells) + f" | {MLPERF_V40['H200']:,} |")
    for key, label, mlperf in PROJECTED:
        cells = []
        for p, _ in precisions:
            s = projected.get((f"train/resnet50/{p}/bs256/graph", key))
            cells.append(f"{256 / s:,.0f}" if s else "–")
        lines.append(f"| {label} | projected from the H200 row (roofline, docs/comparisons.md) | " + " | ".join(cells) +
                     f" | {MLPERF_V40[mlperf]:,} |" if mlperf else f"| {label} | projected from the H200 row (roofline, docs/comparisons.md) | "
                     + " | ".join(cells) + " | – |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
