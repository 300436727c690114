#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/training/step_parts.py on a synthetic `training --layers_out` file:
each section's part table and median-step sentence are kept, the per-layer rows dropped, a
section without a part table skipped, and a file without any part table refused."""
import os
import subprocess
import sys
import tempfile

LAYERS = """
## resnet50 training amp_fp16 nhwc batch 64

built (searched and verified) in 20.3 s

| layer | shape | forward | data gradient | weight gradient | batch norm | checks |
|---|---|---|---|---|---|---|
| conv1 | fp16_nhwc/n64_c3 | engine 1 |  | engine 2 | cuDNN persistent | passed |

### Where the step's time goes

Kernel mode: ... The median step's kernels take 12.1206 ms (launched piece by piece the step spans 12.9304 ms).

| part | pieces | ms | share |
|---|---|---|---|
| batch norm backward | 53 | 2.48655 | 20.515 % |
| max pool backward | 1 | 1.17467 | 9.69152 % |

| piece | ms | share | kernels |
|---|---|---|---|
| conv forward: conv1 | 155.022 | 1.27899 % | sm90_xmma_fprop (1/pass) |

## resnet50 training tf32 nhwc batch 8

built in 3 s, no trace
"""


def run(script, *paths):
    return subprocess.run([sys.executable, script, *paths], capture_output=True, text=True)


def main(script):
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        layers = os.path.join(tmp, "layers.md")
        with open(layers, "w", encoding="utf-8") as f:
            f.write(LAYERS)
        r = run(script, layers)
        check(r.returncode == 0, f"exit status {r.returncode}: {r.stderr}")
        out = r.stdout
        check("## resnet50 training amp_fp16 nhwc batch 64" in out, "the section heading")
        check("The median step's kernels take 12.1206 ms (launched piece by piece the step spans 12.9304 ms)." in out,
              "the median-step sentence, whole")
        check("| batch norm backward | 53 | 2.48655 | 20.515 % |" in out and "| max pool backward | 1 | 1.17467 |" in out,
              "the part rows")
        check("conv1 | fp16_nhwc" not in out and "sm90_xmma_fprop" not in out, "per-layer and per-piece rows dropped")
        check("tf32" not in out, "a section without a part table skipped")
        empty = os.path.join(tmp, "empty.md")
        with open(empty, "w", encoding="utf-8") as f:
            f.write("## resnet50 training fp32 nhwc batch 2\n\nno trace\n")
        r = run(script, empty)
        check(r.returncode == 1 and "no part tables" in r.stderr, "a file without part tables refused")
    for f in failures:
        print("FAILED:", f)
    print(f"step_parts_test: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
