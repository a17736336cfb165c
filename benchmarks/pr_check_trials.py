"""Repeated trials of `jaxbench pr-check` on the CPU: how often two equal commits of a stand-in
optax are called ok or inconclusive (never a regression, the target: 19 of 20 or better), and how often a
commit that slows the tiny step by about 10 % is caught. Prints one line per trial and a summary; each trial
is a fresh `jaxbench pr-check` with its own runs (the overlays are made once).

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/pr_check_trials.py --equal 20 --slow 3

The settings are the pull-request workflow's on the CPU (batch 32 on one core) with the tiny recipe shortened
to 24 steps, as tests/prcheck/test_pr_check.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STANDIN = [sys.executable, str(ROOT / "scripts" / "standin-optax")]
SETTINGS = ["--set", "train.global_batch=32", "--set", "train.steps=24", "--set", "train.warmup_steps=4"]


def standin(*args: str) -> str:
    done = subprocess.run([*STANDIN, *args], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def trial(folder: Path, base: str, head: str, work: Path, out: Path, cpu: str) -> tuple[int, dict, float]:
    started = time.monotonic()
    source = f"optax={folder}#{head}"
    done = subprocess.run(
        [
            sys.executable, "-m", "jaxbench", "pr-check", "--base", base, "--source", source,
            *SETTINGS, "--cpus", cpu, "--out", str(out), "--work", str(work),
        ],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    seconds = time.monotonic() - started
    verdict = json.loads((out / "pr-check.json").read_text()) if (out / "pr-check.json").is_file() else {}
    if not verdict:
        print(done.stderr[-2000:], file=sys.stderr)
    return done.returncode, verdict, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--equal", type=int, default=20, help="trials of two equal commits")
    parser.add_argument("--slow", type=int, default=3, help="trials of the ~10 %% slower commit")
    parser.add_argument("--rounds", default="22", help="the slow commit's sin/cos rounds")
    args = parser.parse_args()
    cpu = str(max(os.sched_getaffinity(0)))
    scratch = Path(tempfile.mkdtemp(prefix="pr-check-trials-"))
    folder = scratch / "optax"
    first = standin("init", str(folder))
    ordinary = standin("commit", str(folder), "ordinary")
    slow = standin("commit", str(folder), "slow", "--rounds", args.rounds)
    work = scratch / "work"
    plan = [("equal", first, ordinary)] * args.equal + [("slow", ordinary, slow)] * args.slow
    tally: dict[str, list[str]] = {"equal": [], "slow": []}
    durations: dict[str, list[float]] = {"equal": [], "slow": []}
    for index, (kind, base, head) in enumerate(plan):
        code, verdict, seconds = trial(folder, base, head, work, scratch / f"out-{index}", cpu)
        [benchmark] = verdict.get("benchmarks") or [{}]
        found = benchmark.get("verdict", f"error (exit {code})")
        tally[kind].append(found)
        durations[kind].append(seconds)
        interval = (
            f"{benchmark['ratio']:.3f} ({benchmark['low']:.3f} .. {benchmark['high']:.3f})"
            if benchmark.get("low") is not None
            else "-"
        )
        print(
            f"trial {index + 1:2d} {kind:5s}: {found:12s} ratio {interval}, {benchmark.get('pairs', 0)} "
            f"pairs, {benchmark.get('runs', 0)} runs, {seconds:.0f} s, exit {code}",
            flush=True,
        )
    for kind, verdicts in tally.items():
        if verdicts:
            counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
            print(
                f"{kind}: {counts} over {len(verdicts)} trials, median "
                f"{statistics.median(durations[kind]):.0f} s a trial, "
                f"{sum(durations[kind]) / 60:.1f} min in all"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
