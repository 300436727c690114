#!/usr/bin/env python3
"""lab/runs/quantized-tables.py on small synthetic inputs: the layers table pairs each layer's
FP16 time with the quantized network's (path, ratio, sums), and the modes table puts one shape
per row with the fastest verified time or cuBLASLt's answer per recipe.
  quantized_tables_test.py PATH_TO_quantized-tables.py"""
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]

LAYERS = """# layers
## resnet50/fp16/bs32

| layer | shape | algorithm | searched us | in the pass us | share | kernels in the pass | verification |
|---|---|---|---|---|---|---|---|
| conv1 | fp16_nhwc/n32_c3 | legacy fused: cuDNN legacy (search) | 80 | 81 | 8 % | k | passed |
| layer1.0.conv1 | fp16_nhwc/n32_c64 | fused graph: cuDNN engine 39 | 20 | 21 | 2 % | k | passed |

## resnet50/int8/bs32

| layer | precision | why | x scale | y scale | weight scales (min-max) |
|---|---|---|---|---|---|
| conv1 | fp16 | FP16 faster | 1 | 1 | 1 |

| layer | shape | algorithm | searched us | verification |
|---|---|---|---|---|
| conv1 | fp16_nhwc/n32_c3 | fp16 legacy fused: cuDNN legacy (search) | 80 | passed |
| layer1.0.conv1 | int8_nhwc/n32_c64 | cuBLASLt matmul: algo 3 | 10 | passed |
"""

MODES = """| shape | recipe | heuristic | verified | best us | TFLOP/s | a failure |
|---|---|---|---|---|---|---|
| c64 k64 56x56 n32 | fp16 | CUBLAS_STATUS_SUCCESS, 8 | 8 of 8 | 8.70 | 95 |  |
| c64 k64 56x56 n32 | int8 | CUBLAS_STATUS_NOT_SUPPORTED, 0 | 0 of 0 | - | - |  |
| c64 k256 56x56 n32 | fp16 | CUBLAS_STATUS_SUCCESS, 8 | 0 of 8 | - | - | algo 0: 3 of its bound |
| c64 k256 56x56 n32 | int8 | CUBLAS_STATUS_SUCCESS, 2 | 1 of 2 | 56.33 | 58 |  |
"""


def run(kind, text):
    with tempfile.NamedTemporaryFile("w", suffix=".md") as f:
        f.write(text)
        f.flush()
        return subprocess.run([sys.executable, TOOL, kind, f.name], capture_output=True, text=True, check=True).stdout


failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


layers = run("layers", LAYERS)
expect("| conv1 | 80.0 | 80.0 | FP16 legacy fused | 1.00x |" in layers, "the stem's row: FP16 in both, named as FP16")
expect("| layer1.0.conv1 | 20.0 | 10.0 | cuBLASLt matmul | 2.00x |" in layers, "a layer's path and ratio")
expect("| sum | 100.0 | 90.0 |  | 1.11x |" in layers, "the sums and their ratio")
expect(layers.splitlines()[0] == "| layer | FP16 us | int8 us | int8 runs | FP16/int8 |", "the header names the quantized network")

modes = run("modes", MODES)
lines = modes.splitlines()
expect(lines[0] == "| shape | fp16 | int8 |", "one column per recipe, in the probe's order")
expect(lines[2] == "| c64 k64 56x56 n32 | 8.70 (8/8) | NOT_SUPPORTED |", "a time with verified of offered, a refusal by name")
expect(lines[3] == "| c64 k256 56x56 n32 | none verified (0 of 8) | 56.33 (1/2) |", "offered but none verified is said so")

bad = subprocess.run([sys.executable, TOOL, "layers", "/dev/null"], capture_output=True, text=True)
expect(bad.returncode != 0 and "no FP16 network's layer table" in bad.stderr, "a file without an FP16 table is named as such")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures) + "\n--- layers:\n" + layers + "--- modes:\n" + modes)
    sys.exit(1)
print("quantized-tables: layers and modes tables as expected")
