#!/usr/bin/env python3
"""gpucmp's headers are grouped by layer, and no include may point up a layer.

usage: check-include-layers.py REPO_ROOT
Layers, lowest first (docs/architecture.md): a header may include headers of its own layer
or of a lower one. version.hpp may be included from anywhere; core.hpp and bench.hpp, the
umbrellas, are included by nothing in include/ but bench.hpp (which includes core.hpp). The
top level of include/gpucmp/ holds only the umbrellas and version.hpp.
Exit 0, or 1 naming every include that breaks a rule.
"""
import os
import re
import sys

# folder -> rank; a header in folder A may include a header in folder B when rank(B) <= rank(A)
LAYERS = {
    "cuda": 0, "data": 0, "kernels": 0,
    "io": 1, "specs": 1,
    "power": 2,
    "measure": 3,
    "serving": 4,
    "ops": 5, "multigpu": 5,
    "models": 6,
    "training": 7,
    "gbench": 8,
}
TOP_LEVEL = {"bench.hpp", "core.hpp", "version.hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]gpucmp/([^>"]+)[>"]', re.M)


def layer_of(relative):
    """The layer of include/gpucmp/<relative>: its first folder, or None at the top level."""
    head = relative.split("/", 1)[0]
    return head if "/" in relative else None


def main():
    root = os.path.join(sys.argv[1], "include", "gpucmp")
    failures = []
    headers = []
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith((".hpp", ".cuh", ".h")):
                headers.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    for h in sorted(headers):
        layer = layer_of(h)
        if layer is None and h not in TOP_LEVEL:
            failures.append(f"{h}: only {', '.join(sorted(TOP_LEVEL))} may sit at the top of include/gpucmp/")
        if layer is not None and layer not in LAYERS:
            failures.append(f"{h}: folder '{layer}' is not a layer (add it to LAYERS and docs/architecture.md)")
            continue
        text = open(os.path.join(root, h), encoding="utf-8").read()
        for target in INCLUDE.findall(text):
            if target == "version.hpp":
                continue
            if not os.path.exists(os.path.join(root, target)):
                failures.append(f"{h}: includes gpucmp/{target}, which does not exist")
                continue
            if target in ("core.hpp", "bench.hpp"):
                if not (h == "bench.hpp" and target == "core.hpp"):
                    failures.append(f"{h}: includes the umbrella gpucmp/{target}")
                continue
            if layer is None:
                continue  # the umbrellas include every layer
            to = layer_of(target)
            if to is None or LAYERS.get(to, 99) > LAYERS[layer]:
                failures.append(f"{h} ({layer}, layer {LAYERS[layer]}) includes gpucmp/{target} "
                                f"({to}, layer {LAYERS.get(to, '?')}): an include may not point up a layer")
    for line in failures:
        print("check-include-layers: " + line)
    print(f"check-include-layers: {len(headers)} headers" + (f", {len(failures)} broken rules" if failures else ", every include points down or across"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
