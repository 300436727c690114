#!/usr/bin/env python3
"""Small tables from a quantized-check.sh run, for results/ and the docs.

  quantized-tables.py layers network_layers_bs32.md   each layer's searched time in FP16 and in
                                                      each quantized network of the file, with the
                                                      path (and precision) the quantized one runs
  quantized-tables.py modes modes.md                  lab/probes/matmul_1x1_modes' rows as one row
                                                      per shape, a column per recipe: the fastest
                                                      verified time (verified of offered), or
                                                      cuBLASLt's answer where it offered nothing
"""
import re
import sys


def sections(text):
    """{"fp16": [rows], "int8": [rows]}: each network's layer table (the one with a shape
    column and searched times), rows as {column: cell}."""
    out, name, header = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^## \w+/(\w+)/bs\d+", line)
        if m:
            name, header = m.group(1), None
            continue
        if name is None or not line.startswith("|"):
            header = None if not line.startswith("|") else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:4] == ["layer", "shape", "algorithm", "searched us"]:
            header = cells
            out[name] = []
        elif header and not set(line) <= set("|-: ") and len(cells) == len(header):
            out[name].append(dict(zip(header, cells)))
    return out


def path_of(algorithm):
    """"fused graph", "cuBLASLt matmul", "FP16 legacy fused", ...: the words before the first colon."""
    head = algorithm.split(":")[0].strip()
    return "FP16 " + head[len("fp16 "):] if head.startswith("fp16 ") else head


def layers(path):
    nets = sections(open(path).read())
    if "fp16" not in nets:
        sys.exit(f"quantized-tables: no FP16 network's layer table in {path}")
    others = [n for n in nets if n != "fp16"]
    half = {r["layer"]: r for r in nets["fp16"]}
    head = ["layer", "FP16 us"] + [c for n in others for c in (f"{n} us", f"{n} runs", f"FP16/{n}")]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    totals = {n: 0.0 for n in ["fp16"] + others}
    for name, r in half.items():
        row = [name, f"{float(r['searched us']):.1f}"]
        totals["fp16"] += float(r["searched us"])
        for n in others:
            q = next((x for x in nets[n] if x["layer"] == name), None)
            if q is None or not q["searched us"]:
                row += ["", "", ""]
                continue
            t = float(q["searched us"])
            totals[n] += t
            row += [f"{t:.1f}", path_of(q["algorithm"]), f"{float(r['searched us']) / t:.2f}x" if t > 0 else ""]
        print("| " + " | ".join(row) + " |")
    row = ["sum", f"{totals['fp16']:.1f}"]
    for n in others:
        row += [f"{totals[n]:.1f}", "", f"{totals['fp16'] / totals[n]:.2f}x" if totals[n] > 0 else ""]
    print("| " + " | ".join(row) + " |")


def modes(path):
    shapes, recipes, cells = [], [], {}
    for line in open(path).read().splitlines():
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) < 6 or c[0] == "shape" or set(line) <= set("|-: "):
            continue
        shape, recipe, heuristic, verified, best = c[0], c[1], c[2], c[3], c[4]
        if shape not in shapes:
            shapes.append(shape)
        if recipe not in recipes:
            recipes.append(recipe)
        status = heuristic.split(",")[0].replace("CUBLAS_STATUS_", "")
        if best not in ("", "-"):
            offered = verified.split(" of ")
            cells[shape, recipe] = f"{best} ({offered[0]}/{offered[1]})"
        else:
            cells[shape, recipe] = status if status != "SUCCESS" else f"none verified ({verified})"
    print("| shape | " + " | ".join(recipes) + " |")
    print("|" + "---|" * (len(recipes) + 1))
    for s in shapes:
        print(f"| {s} | " + " | ".join(cells.get((s, r), "") for r in recipes) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("layers", "modes"):
        sys.exit(__doc__)
    {"layers": layers, "modes": modes}[sys.argv[1]](sys.argv[2])
