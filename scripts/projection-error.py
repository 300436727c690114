#!/usr/bin/env python3
"""How far gpucmp's roofline projections land from published measurements.

    scripts/projection-error.py BUILD_DIR [RESULTS_JSON] [OUT_MD]

Projects RESULTS_JSON (default results/h200/suite.json, measured on an H200) onto GPUs with
published results of the same operation, using the gpucmp-report tool, and writes a
markdown table of projected vs published figures (default results/h200/projection_error.md).
The published figures and their sources are from shared/reference/published-results.md.
"""
import csv
import io
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# (benchmark measured here, GPU key, published figure, unit, what was published, source)
PUBLISHED = [
    ("gemm/cublas/bf16/8192x8192x8192/graph", "h100_sxm", 797.8, "TFLOP/s",
     "cuBLAS BF16 8192³, normal(0,1) data", "fast.cu README (S28)"),
    ("gemm/cublas/fp16/8192x8192x8192/graph", "a100_80gb_sxm", 253.7, "TFLOP/s",
     "cuBLASLt FP16 8192³, random data, 10,000 warm-ups", "Azure ND A100 v4 (S27)"),
    ("gemm/cublas/fp32/8192x8192x8192/graph", "a100_80gb_pcie", 18.88, "TFLOP/s",
     "cuBLAS SGEMM 5120×4096×4096", "YHs_Sample issue #4 (S29)"),
    ("copy/kernel/none/graph/4294967296", "a100_80gb_sxm", 1610, "GB/s",
     "BabelStream copy", "Azure ND A100 v4 (S27)"),
    ("copy/kernel/none/graph/4294967296", "h100_sxm", 2900, "GB/s",
     "BabelStream copy", "Azure ND H100 v5 (S27)"),
    ("copy/kernel/none/graph/4294967296", "h100_pcie", 1704, "GB/s",
     "gpu-stream copy", "te42kyfo/gpu-benches (S30)"),
    ("copy/kernel/none/graph/4294967296", "l40", 770, "GB/s",
     "gpu-stream copy (L40: same 864 GB/s GDDR6 as the L40S)", "te42kyfo/gpu-benches (S30)"),
]


def main():
    build_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build")
    results = sys.argv[2] if len(sys.argv) > 2 else os.path.join(REPO, "results", "h200", "suite.json")
    out_md = sys.argv[3] if len(sys.argv) > 3 else os.path.join(REPO, "results", "h200", "projection_error.md")
    targets = sorted({key for _, key, *_ in PUBLISHED})
    report = os.path.join(build_dir, "tools", "report", "gpucmp-report")
    out = subprocess.run([report, "compare", results, "--project", ",".join(targets), "--csv", "-"],
                         check=True, capture_output=True, text=True).stdout
    cells = {(r["benchmark"], r["gpu_key"]): r for r in csv.DictReader(io.StringIO(out))}
    lines = ["Projection from the H200 measurements in `" + os.path.relpath(results, REPO) + "` against published results",
             "(`scripts/projection-error.py`).", "",
             "| operation | GPU | projected | published | error | published as | source |", "|---|---|---|---|---|---|---|"]
    errors = []
    for bench, key, published, unit, what, source in PUBLISHED:
        cell = cells.get((bench, key))
        if cell is None or cell["kind"] != "projected":
            lines.append(f"| `{bench}` | {key} | {cell['kind'] if cell else 'missing'} | {published} {unit} | | {what} | {source} |")
            continue
        projected = float(cell["rate"])
        error = projected / published - 1
        errors.append(abs(error))
        lines.append(f"| `{bench}` | {cell['gpu']} | {projected:.1f} {unit} | {published} {unit} | {error * 100:+.1f}% | {what} | {source} |")
    if errors:
        lines += ["", f"Mean absolute error {100 * sum(errors) / len(errors):.1f}%, largest {100 * max(errors):.1f}%."]
    # Cross-GPU ratios, which is what a comparison is read for.
    lines += ["", "| ratio | projected | published | error |", "|---|---|---|---|"]
    def rate(bench, key):
        cell = cells.get((bench, key))
        return float(cell["rate"]) if cell and cell["kind"] == "projected" else None
    for (b1, k1, p1, _, _, _), (b2, k2, p2, _, _, _), label in [
            (PUBLISHED[0], PUBLISHED[1], "H100 SXM BF16 GEMM / A100 SXM FP16 GEMM"),
            (PUBLISHED[4], PUBLISHED[3], "H100 SXM copy / A100 80GB SXM copy"),
            (PUBLISHED[3], PUBLISHED[6], "A100 80GB SXM copy / L40 copy")]:
        r1, r2 = rate(b1, k1), rate(b2, k2)
        if r1 and r2:
            lines.append(f"| {label} | {r1 / r2:.2f} | {p1 / p2:.2f} | {((r1 / r2) / (p1 / p2) - 1) * 100:+.1f}% |")
    text = "\n".join(lines) + "\n"
    with open(out_md, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
