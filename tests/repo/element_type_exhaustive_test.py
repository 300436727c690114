#!/usr/bin/env python3
"""A new element type or recipe that some table or switch does not handle fails the build.

usage: element_type_exhaustive_test.py REPO_ROOT CXX CUDA_INCLUDE_DIR [EXTRA_INCLUDE_DIR ...]

Copies include/ into a temporary folder, compiles one translation unit that includes every
host header with a table or switch over element_type or numerics (cuda/element_type.hpp,
ops/numerics.hpp, ops/gemm_problem.hpp, ops/conv_problem.hpp, ops/cudnn_legacy.hpp,
multigpu/nccl_types.hpp) with the flags of gpucmp's own targets (-Wall -Werror), then
edits the copy the way a contributor would and expects each edit to fail, naming why:
  1. a value added to the enum only: the table's static_assert;
  2. a value with its table row (and count): every switch that lists the values;
and the same two for a new numerics recipe. The unedited copy must compile, so a failure is
the edit's, not the machine's.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HEADERS = ["cuda/element_type.hpp", "ops/numerics.hpp", "ops/gemm_problem.hpp", "ops/conv_problem.hpp",
           "ops/cudnn_legacy.hpp", "multigpu/nccl_types.hpp"]


def compile_tree(tree, cxx, includes):
    source = os.path.join(tree, "tu.cpp")
    with open(source, "w", encoding="utf-8") as f:
        f.write("".join(f"#include <gpucmp/{h}>\n" for h in HEADERS))
        # The visitors are templates: a switch in one is checked where it is instantiated.
        f.write("void instantiate(gpucmp::element_type t, gpucmp::numerics n) {\n"
                "  gpucmp::visit_element(t, [](auto) {});\n"
                "  gpucmp::visit_floating_storage(t, [](auto) {});\n"
                "  gpucmp::visit_gemm_storage(n, [](auto) {});\n"
                "}\n")
    command = [cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", f"-I{tree}/include"]
    command += [f"-I{d}" for d in includes] + [source]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def edit(path, old, new):
    text = open(path, encoding="utf-8").read()
    if old not in text:
        raise SystemExit(f"element_type_exhaustive_test: '{old.strip()}' is no longer in {path}: update the test's edits")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    root, cxx, includes = sys.argv[1], sys.argv[2], sys.argv[3:]
    failures = []

    def case(name, edits, expect):
        with tempfile.TemporaryDirectory() as tree:
            shutil.copytree(os.path.join(root, "include"), os.path.join(tree, "include"))
            for header, old, new in edits:
                edit(os.path.join(tree, "include", "gpucmp", header), old, new)
            status, output = compile_tree(tree, cxx, includes)
        if not edits:
            if status != 0:
                failures.append(f"{name}: the unedited headers do not compile:\n{output[-3000:]}")
            return
        if status == 0:
            failures.append(f"{name}: compiled; it must fail")
            return
        missing = [e for e in expect if not re.search(e, output)]
        if missing:
            failures.append(f"{name}: failed without naming {missing}:\n{output[-3000:]}")
        else:
            print(f"element_type_exhaustive_test: {name}: fails as it should ({', '.join(expect)})")

    case("unedited headers", [], [])
    enum_value = ("cuda/element_type.hpp", "  int32,     ///< signed 32-bit integer",
                  "  int4,\n  int32,     ///< signed 32-bit integer")
    case("an element_type value without a table row", [enum_value], [r"element_types needs one row per element_type value"])
    row = ("cuda/element_type.hpp", '    {element_type::int32, "int32"',
           '    {element_type::int4, "int4", 1, false, 0, 7.0, 1.0, CUDA_R_4I},\n    {element_type::int32, "int32"')
    count = ("cuda/element_type.hpp", "element_type_count = 8;", "element_type_count = 9;")
    switch = r"enumeration value .int4. not handled in switch"
    case("an element_type value with its row but no case in the switches", [enum_value, row, count],
         [switch, r"visit_element", r"visit_floating_storage", r"cudnn_data_type", r"nccl_data_type"])

    recipe = ("ops/numerics.hpp", "  int8,        ///< INT8 input and weight", "  int4,\n  int8,        ///< INT8 input and weight")
    case("a numerics value without a table row", [recipe], [r"numerics_table needs one row per numerics value"])
    recipe_row = ("ops/numerics.hpp", '    {numerics::int8, "int8"',
                  '    {numerics::int4, "int4", {element_type::int8, element_type::int8, element_type::int32, '
                  'element_type::int32, std::nullopt}, precision::int8, 75},\n    {numerics::int8, "int8"')
    recipe_count = ("ops/numerics.hpp", "numerics_count = 9;", "numerics_count = 10;")
    case("a numerics value with its row but no case in the switches", [recipe, recipe_row, recipe_count],
         [switch, r"visit_gemm_storage"])

    for line in failures:
        print("element_type_exhaustive_test: " + line)
    print("element_type_exhaustive_test: " + ("FAILED" if failures else "every edit failed the build, naming why"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
