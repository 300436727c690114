#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The Python reader as a user gets it: `pip install ./python` into a folder of its own, then
read a result file through it (rows, flat records, pandas when present, the command line), its
refusals, and its version against the library's.

usage: python_package_test.py REPO_ROOT RESULT.json
Exit 0 passed, 1 failed, 77 skipped (no pip or setuptools to install with, or no wheel package
where setuptools before 70.1 needs it)."""
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

root, result = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what)


if importlib.util.find_spec("pip") is None or importlib.util.find_spec("setuptools") is None:
    print("python_package_test: SKIPPED: no pip or setuptools to install the package with")
    sys.exit(77)
setuptools_version = importlib.metadata.version("setuptools")
if tuple(int(x) for x in setuptools_version.split(".")[:2]) < (70, 1) and importlib.util.find_spec("wheel") is None:
    print(f"python_package_test: SKIPPED: setuptools {setuptools_version} builds wheels through the wheel package, "
          "which is missing (scripts/install-deps.sh installs it)")
    sys.exit(77)

with tempfile.TemporaryDirectory() as target, tempfile.TemporaryDirectory() as source:
    # A copy of python/ is built (setuptools writes its egg-info beside the sources), and
    # --no-build-isolation builds it with the installed setuptools, so no network is needed.
    shutil.copytree(os.path.join(root, "python"), os.path.join(source, "python"),
                    ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-cache-dir", "--target", target, os.path.join(source, "python")], capture_output=True,
                          text=True, cwd=tempfile.gettempdir())
    check(done.returncode == 0, f"pip install ./python: exit {done.returncode}: {done.stderr[-1500:]}")
    env = dict(os.environ, PYTHONPATH=target)

    def python(code, *args):
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                              cwd=tempfile.gettempdir())

    probe = python("""
import json, sys, gpucmp_results as g
f = g.load(sys.argv[1])
records = f.records()
print(json.dumps({"where": g.__file__, "version": g.__version__, "rows": len(f.rows), "records": records}))
""", result)
    check(probe.returncode == 0, f"reading through the installed package: {probe.stderr[-1500:]}")
    if probe.returncode == 0:
        facts = json.loads(probe.stdout)
        check(facts["where"].startswith(target), f"the package came from {facts['where']}, not the install")
        doc = json.load(open(result))
        rows = doc["gpucmp"]["results"]
        check(facts["rows"] == len(rows) and len(facts["records"]) == len(rows), "one record per row")
        first, flat = rows[0], facts["records"][0]
        check(flat["benchmark"] == first["benchmark"] and flat["seconds"] == first["seconds"], "a record keeps the row's keys")
        check(all(flat[f"axis.{k}"] == v for k, v in first.get("axes", {}).items()) and first.get("axes"),
              "each axis is a column axis.<name>")
        check(flat["gpu"] == doc["context"]["gpu_name"], "a record names the file's GPU")
        version_hpp = open(os.path.join(root, "include/gpucmp/version.hpp")).read()
        library = re.search(r'version_string = "([^"]+)"', version_hpp).group(1)
        pyproject = re.search(r'^version = "([^"]+)"', open(os.path.join(root, "python/pyproject.toml")).read(), re.M).group(1)
        check(facts["version"] == library == pyproject, f"versions: package {facts['version']}, pyproject {pyproject}, "
              f"library {library}")

    frame = python("""
import sys, gpucmp_results as g
f = g.load(sys.argv[1])
try:
    import pandas
except ImportError:
    try:
        f.dataframe()
    except ImportError as e:
        print("no pandas:", e)
    sys.exit(0)
df = f.dataframe()
print("pandas:", df.shape[0], "rows", "seconds" in df.columns)
""", result)
    check(frame.returncode == 0 and ("needs pandas" in frame.stdout or " rows True" in frame.stdout),
          f"dataframe(): {frame.stdout} {frame.stderr[-800:]}")

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as bad:
        doc = json.load(open(result))
        doc["gpucmp"]["results"][0]["sample_seconds"] = [1e-3, -1]
        json.dump(doc, bad)
    cli = subprocess.run([sys.executable, "-m", "gpucmp_results", result], capture_output=True, text=True, env=env)
    check(cli.returncode == 0 and "benchmark" in cli.stdout and doc["gpucmp"]["results"][0]["benchmark"] in cli.stdout,
          f"python -m gpucmp_results FILE: {cli.returncode} {cli.stderr[-500:]}")
    refused = subprocess.run([sys.executable, "-m", "gpucmp_results", bad.name], capture_output=True, text=True, env=env)
    check(refused.returncode == 1 and "'sample_seconds' is not a non-empty list of finite times > 0" in refused.stderr
          and bad.name in refused.stderr, f"a bad file is refused, naming it and the key: {refused.stderr[-500:]}")
    os.unlink(bad.name)

print("python_package_test:", "FAILED" if failures else "passed")
sys.exit(1 if failures else 0)
