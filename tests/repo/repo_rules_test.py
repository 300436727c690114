#!/usr/bin/env python3
"""The repository-rule checks fail when a rule is broken, on small trees made here.

usage: repo_rules_test.py REPO_ROOT
Runs scripts/check-include-layers.py, scripts/check-results.py, scripts/specs/generate.py,
scripts/check-results-format.py and scripts/check-doc-links.py on temporary trees: each must pass on a tree that keeps its rule and fail, naming the
culprit, on one that breaks it.
"""
import os
import shutil
import subprocess
import sys
import tempfile


def run(script, root):
    done = subprocess.run([sys.executable, script, root], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def main():
    repo = sys.argv[1]
    layers = os.path.join(repo, "scripts", "check-include-layers.py")
    results = os.path.join(repo, "scripts", "check-results.py")
    failures = []

    def check(ok, what, output=""):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)
            print(output)

    with tempfile.TemporaryDirectory() as t:
        write(t, "include/gpucmp/cuda/error.hpp", "#pragma once\n")
        write(t, "include/gpucmp/measure/engine.hpp", "#include <gpucmp/cuda/error.hpp>\n#include <gpucmp/version.hpp>\n")
        write(t, "include/gpucmp/version.hpp", "#pragma once\n")
        write(t, "include/gpucmp/core.hpp", "#include <gpucmp/measure/engine.hpp>\n")
        write(t, "include/gpucmp/bench.hpp", "#include <gpucmp/core.hpp>\n")
        rc, out = run(layers, t)
        check(rc == 0, "include layers: a tree whose includes point down passes", out)
        write(t, "include/gpucmp/cuda/stream.hpp", "#include <gpucmp/measure/engine.hpp>\n")
        rc, out = run(layers, t)
        check(rc == 1 and "cuda/stream.hpp (cuda, layer 0) includes gpucmp/measure/engine.hpp" in out,
              "include layers: an include that points up fails, naming both headers", out)
        os.remove(os.path.join(t, "include/gpucmp/cuda/stream.hpp"))
        write(t, "include/gpucmp/engine.hpp", "#pragma once\n")
        rc, out = run(layers, t)
        check(rc == 1 and "engine.hpp: only" in out, "include layers: a header at the top level fails", out)
        os.remove(os.path.join(t, "include/gpucmp/engine.hpp"))
        write(t, "include/gpucmp/ops/gemm.cuh", "#include <gpucmp/core.hpp>\n")
        rc, out = run(layers, t)
        check(rc == 1 and "includes the umbrella gpucmp/core.hpp" in out, "include layers: an umbrella included from a layer fails", out)

    with tempfile.TemporaryDirectory() as t:
        def git(*args):
            subprocess.run(["git", "-C", t, *args], check=True, capture_output=True)
        git("init", "-q")
        write(t, "results/h200/named.json", "{}\n")
        write(t, "docs/results.md", "see named.json\n")
        git("add", "-A")
        rc, out = run(results, t)
        check(rc == 0, "results: a results file that a doc names passes", out)
        write(t, "results/h200/orphan.md", "x\n")
        git("add", "-A")
        rc, out = run(results, t)
        check(rc == 1 and "results/h200/orphan.md: named by no doc" in out, "results: an unnamed results file fails", out)
        write(t, "docs/results.md", "see named.json and orphan.md\n")
        write(t, "results/h200/named.json", "0" * 1_000_001)
        git("add", "-A")
        rc, out = run(results, t)
        check(rc == 1 and "over the 1000000-byte limit" in out, "results: more than 1 MB fails", out)

    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "scripts", "specs"))
        os.makedirs(os.path.join(t, "include", "gpucmp", "specs"))
        os.makedirs(os.path.join(t, "docs"))
        generator = os.path.join(t, "scripts", "specs", "generate.py")
        shutil.copy(os.path.join(repo, "scripts", "specs", "generate.py"), generator)
        shutil.copytree(os.path.join(repo, "data"), os.path.join(t, "data"))

        def generate(*args):
            done = subprocess.run([sys.executable, generator, *args], capture_output=True, text=True)
            return done.returncode, done.stdout + done.stderr
        rc, out = generate()
        check(rc == 0, "specs: the generator writes the header and the page from data/", out)
        rc, out = generate("--check")
        check(rc == 0, "specs: --check passes on what it just wrote", out)
        sheet = os.path.join(t, "data", "gpus.csv")
        text = open(sheet).read()
        open(sheet, "w").write(text.replace(",4800,", ",4900,", 1))
        rc, out = generate("--check")
        check(rc == 1 and "specs_data.hpp is not what data/ gives" in out, "specs: a changed figure makes --check fail", out)
        lines = text.splitlines(keepends=True)
        open(sheet, "w").write("".join(lines + [lines[1]]))
        rc, out = generate("--check")
        check(rc != 0 and "appears twice" in out, "specs: a duplicated key is refused, naming the line", out)
        open(sheet, "w").write(text.replace("N-MIG", "N-NOPE", 1))
        rc, out = generate("--check")
        check(rc != 0 and "source key 'N-NOPE' is not in data/gpu-sources.csv" in out,
              "specs: an unknown source key is refused", out)

    with tempfile.TemporaryDirectory() as t:
        fmt = os.path.join(repo, "scripts", "check-results-format.py")
        for path in ("include/gpucmp/measure/result_schema.hpp", "docs/results-format.md"):
            write(t, path, open(os.path.join(repo, path)).read())
        rc, out = run(fmt, t)
        check(rc == 0, "results format: passes on the repository's header and page", out)
        doc = os.path.join(t, "docs", "results-format.md")
        text = open(doc).read()
        open(doc, "w").write(text.replace("| `power_peak_w` | W |", "| `power_peak_w` | kW |", 1))
        rc, out = run(fmt, t)
        check(rc == 1 and "power_peak_w" in out, "results format: a wrong unit on the page fails, naming the key", out)
        open(doc, "w").write("".join(l for l in text.splitlines(keepends=True) if not l.startswith("| `kernels`")))
        rc, out = run(fmt, t)
        check(rc == 1 and "kernels" in out, "results format: a key missing from the page fails, naming it", out)

    with tempfile.TemporaryDirectory() as t:
        doc_links = os.path.join(repo, "scripts", "check-doc-links.py")
        write(t, "README.md", "[guide](docs/guide.md), [its table](docs/guide.md#the-h200-2026-12-03-a--b) and "
                              "[a site](https://example.com/nowhere)\n")
        write(t, "docs/guide.md", "# Guide\n\n## The H200 (2026-12-03): `a` / b\n\n[results](results/run.md#run-1)\n"
                                  "```\n[not a link](missing.md)\n```\n")
        write(t, "docs/results/run.md", "# Runs\n\n## Run\n\n## Run\n\n[back](../guide.md) [up](../../README.md)\n")
        rc, out = run(doc_links, t)
        check(rc == 0, "doc links: files, GitHub-slugged headings, repeated headings and code blocks pass", out)
        write(t, "docs/results/run.md", "# Runs\n\n## Run\n\n## Run\n\n[back](../guides.md)\n")
        rc, out = run(doc_links, t)
        check(rc == 1 and "docs/results/run.md:7: ../guides.md: no such file" in out,
              "doc links: a link to a missing file fails, naming the page and line", out)
        write(t, "docs/results/run.md", "# Runs\n\n## Run\n")
        rc, out = run(doc_links, t)
        check(rc == 1 and "no heading with anchor 'run-1' in docs/results/run.md" in out,
              "doc links: a link to a missing heading fails, naming the anchor", out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
