"""Acceptance rows as the issues ask for them: a list of {row, measured, target, unit, pass},
written as OUT_DIR/acceptance.json and as a markdown table in OUT_DIR/summary.md. Shared by
lab/acceptance/architecture.py, training.py and multigpu.py."""
import json
import os


class Rows:
    def __init__(self):
        self.rows = []

    def add(self, name, measured, target, unit, passed):
        self.rows.append({"row": name, "measured": measured, "target": target, "unit": unit, "pass": bool(passed)})

    def write(self, out_dir, note=""):
        """Writes acceptance.json and summary.md (the table, then note) into out_dir and prints both."""
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "acceptance.json"), "w") as f:
            json.dump(self.rows, f, indent=1)
        table = "| row | measured | target | unit | pass |\n|---|---|---|---|---|\n" + "".join(
            f"| {r['row']} | {r['measured']} | {r['target']} | {r['unit']} | {'PASS' if r['pass'] else 'FAIL'} |\n"
            for r in self.rows)
        if note:
            table += "\n" + note.rstrip("\n") + "\n"
        with open(os.path.join(out_dir, "summary.md"), "w") as f:
            f.write(table)
        print(table)
