#!/usr/bin/python3
"""How the clocks of published result logs run: the evidence for review's clock rules (docs/review.md).

    scripts/log-clocks.py DIR...

For every result_<N>.txt below each DIR, counts the logs that break review's three rules (run_stop before
run_start; a line between them dated before run_start; run_stop before the last evaluation before it, MiniGo
excepted: its rules evaluate after training) and, for comparison, the logs where any line after run_start is dated
before the line above it. Exits 1 when a log breaks a rule.
"""
import json
import os
import re
import sys

RESULT = re.compile(r"result_\d+\.txt$")
EVALUATIONS = ("eval_accuracy", "eval_error")


def events(path):
    with open(path, errors="replace") as log:
        for line in log:
            start = line.find(":::MLLOG ")
            if start < 0:
                continue
            try:
                event = json.loads(line[start + 9:])
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("time_ms"), (int, float)):
                yield event


def clock_problems(path, minigo):
    """The rules the log breaks, and whether any line after run_start is dated before the line above it."""
    problems, backwards = [], False
    run_start = latest = last_evaluation = None
    for event in events(path):
        key, time_ms = event.get("key"), event["time_ms"]
        if run_start is None:
            if key == "run_start":
                run_start = latest = time_ms
            continue
        backwards = backwards or time_ms < latest
        latest = max(latest, time_ms)
        if key == "run_stop":
            if time_ms < run_start:
                problems.append("run_stop before run_start")
            elif not minigo and last_evaluation is not None and time_ms < last_evaluation:
                problems.append("run_stop before the last evaluation")
            break
        if time_ms < run_start:
            problems.append(f"{key} before run_start")
        if key in EVALUATIONS:
            last_evaluation = time_ms
    return problems, backwards


def main(roots):
    logs = broken = backwards = 0
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in sorted(f for f in files if RESULT.search(f)):
                path = os.path.join(folder, name)
                problems, ran_backwards = clock_problems(path, "/minigo/" in path.replace(os.sep, "/"))
                logs += 1
                backwards += ran_backwards
                if problems:
                    broken += 1
                    print(f"{path}: {'; '.join(problems)}")
    print(f"{logs} logs: {broken} break review's clock rules; {backwards} have a line dated before the one above it")
    return 1 if broken else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
