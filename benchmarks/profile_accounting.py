"""Whether `jaxbench run --profile` accounts for the step time: the profiled steps' breakdown (by
kind of op and host, which add up to their wall time) against the median of the same run's timed steps, which
ran before the profiler started. Each round is a fresh `jaxbench run` of the tiny LLaMA on the CPU, with
XLA:CPU's op events switched on (--xla_cpu_enable_xprof_traceme); the figure is the ratio breakdown total /
timed median per round, and its median. The batch is large enough (64) that the tracer's cost per op is a
small share of the step (docs/measurements.md, "Profiles").

    .venv/bin/python benchmarks/profile_accounting.py [--rounds 3] [--batch 64] [--profile-steps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def one_round(batch: int, profile_steps: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        environ = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_cpu_enable_xprof_traceme=true")
        argv = [
            sys.executable,
            "-m",
            "jaxbench",
            "run",
            "llama2",
            "--steps",
            "8",
            "--no-ingest",
            "--out",
            out,
        ]
        argv += ["--set", "train.warmup_steps=2", "--set", f"train.global_batch={batch}"]
        argv += ["--profile", str(profile_steps)]
        subprocess.run(argv, env=environ, check=True, capture_output=True, timeout=600)
        [path] = Path(out).glob("*.json")
        result = json.loads(path.read_text())
    seconds = result["profile"]["seconds_per_step"]
    return {"timed median": result["timing"]["step_time_s"]["median"], "breakdown": sum(seconds.values())} | {
        f"  {kind}": value for kind, value in seconds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--profile-steps", type=int, default=3)
    args = parser.parse_args()
    rounds = [one_round(args.batch, args.profile_steps) for _ in range(args.rounds)]
    for name in rounds[0]:
        values = " ".join(f"{r[name] * 1e3:8.2f}" for r in rounds)
        print(f"{name:24} ms: {values}")
    ratios = [r["breakdown"] / r["timed median"] for r in rounds]
    print(f"{'breakdown / timed':24}    : " + " ".join(f"{x:8.3f}" for x in ratios))
    print(f"median ratio {statistics.median(ratios):.3f} over {args.rounds} rounds (target: within 10 %)")


if __name__ == "__main__":
    main()
