"""Repeated trials of `jaxbench triage` on the CPU against ranges built to mislead it: a stand-in optax with
20-40 commits after the last good pin, the slow commit at a random position, decoys that change code but not
the compiled program (docstring, renames), a commit that changes the program but not the speed (retune), and
one that does not parse (fixed by the next). Each trial is a fresh store holding one throughput incident
from the last good to the first bad pin and one `jaxbench triage` of it; quiet trials run alone, loaded ones
beside busy processes. Prints one line per trial and counts right / wrong / no culprit, with runs and minutes.

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/triage_trials.py --quiet 20 --loaded 20

The target (issue: triage that is never wrong): 0 wrong culprits in both; right in >= 90 % quiet and >= 60 %
under load. The settings are the pull-request trials' (batch 32, 24 steps of the tiny recipe).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jaxbench.harness import recipes  # noqa: E402
from jaxbench.results import store, synthetic_incident  # noqa: E402

STANDIN = [sys.executable, str(ROOT / "scripts" / "standin-optax")]
OVERRIDES = ["train.global_batch=32", "train.steps=24", "train.warmup_steps=4"]
DECOYS = ("docstring", "rename")


def standin(*args: str) -> str:
    done = subprocess.run([*STANDIN, *args], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def layout(rng: random.Random, commits: int) -> dict[int, str]:
    """Position (1 = the first commit after the last good pin) -> kind; the rest ordinary."""
    positions = list(range(1, commits + 1))
    culprit = rng.choice(positions)
    kinds = {culprit: "slow"}
    free = [p for p in positions if p != culprit]
    broken = rng.choice([p for p in free if p + 1 <= commits and p + 1 != culprit])
    kinds |= {broken: "broken", broken + 1: "fix"}
    free = [p for p in free if p not in kinds]
    for kind, position in zip((*DECOYS, "retune"), rng.sample(free, 3), strict=True):
        kinds[position] = kind
    return kinds


def build_range(folder: Path, kinds: dict[int, str], commits: int, rounds: int) -> tuple[str, str, str]:
    """The stand-in's history: returns (last good, culprit, first bad)."""
    good = standin("init", str(folder))
    culprit = ""
    for position in range(1, commits + 1):
        kind = kinds.get(position, "ordinary")
        extra = ["--rounds", str(rounds)] if kind == "slow" else []
        commit = standin("commit", str(folder), kind, *extra)
        culprit = commit if kind == "slow" else culprit
    return good, culprit, commit


def incident_store(url: str, repository: str, good: str, bad: str) -> int:
    """A store holding the incident the nightly would have opened: the last good and first bad runs of the
    trials' benchmark, and one throughput incident between them."""
    recipe = recipes.load("llama2", "tiny", OVERRIDES)
    return synthetic_incident.add_incident(
        store.connect(url),
        component="optax",
        repository=repository,
        good=good,
        bad=bad,
        config=recipe.resolved(),
        config_hash=recipes.recipe_hash(recipe),
        night=dt.date(2026, 10, 21),
    )


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def load(processes: int, cpu: int | None) -> Iterator[None]:
    """`processes` busy loops for the duration, on `cpu` (None: on any CPU)."""
    workers = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for worker in workers:
        worker.start()
        if cpu is not None and worker.pid is not None:
            os.sched_setaffinity(worker.pid, {cpu})
    try:
        yield
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()


def trial(scratch: Path, rng: random.Random, rounds: int, cpu: str, keep: Path | None) -> dict[str, object]:
    commits = rng.randint(20, 40)
    kinds = layout(rng, commits)
    folder = scratch / "optax"
    good, culprit, bad = build_range(folder, kinds, commits, rounds)
    url = f"sqlite:///{scratch / 'store.sqlite'}"
    incident = incident_store(url, str(folder), good, bad)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "jaxbench", "triage", str(incident), "--work", str(scratch / "triage"),
         "--cpus", cpu],
        capture_output=True, text=True, check=False, cwd=ROOT, env=os.environ | {"JAXBENCH_DB": url},
    )  # fmt: skip
    minutes = (time.monotonic() - started) / 60
    summary = scratch / "triage" / "summary.json"
    if keep is not None and summary.with_suffix(".md").is_file():
        keep.mkdir(parents=True, exist_ok=True)
        layout_said = ", ".join(f"{position} {kind}" for position, kind in sorted(kinds.items()))
        report = summary.with_suffix(".md").read_text()
        (keep / f"{scratch.name}.md").write_text(f"<!-- {commits} commits: {layout_said} -->\n{report}")
        (keep / f"{scratch.name}.json").write_text(summary.read_text())  # every probe's run medians
    outcome = json.loads(summary.read_text())["outcome"] if summary.is_file() else {}
    named = outcome.get("culprit")
    verdict = "right" if named == culprit else "wrong" if named else "none"
    position = {v: k for k, v in kinds.items()}["slow"]
    return {
        "verdict": verdict,
        "exit": done.returncode,
        "commits": commits,
        "culprit_position": position,
        "runs": outcome.get("runs"),
        "minutes": round(minutes, 2),
        "reason": outcome.get("reason") or done.stderr.strip().splitlines()[-1:],
        "program_search": outcome.get("program_search"),
        "clock": outcome.get("clock"),
        "reproduction": outcome.get("reproduction"),
        "report": f"{scratch.name}.md" if keep is not None else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet", type=int, default=20, help="trials with nothing else running")
    parser.add_argument("--loaded", type=int, default=20, help="trials beside busy processes")
    parser.add_argument("--load", type=int, default=2, help="busy processes beside a loaded trial")
    parser.add_argument("--rounds", type=int, default=48, help="the slow commit's sin/cos rounds (~+25 %%)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cpu",
        type=int,
        help="the CPU the triage's runs go to (--cpus); default the last this process may use",
    )
    parser.add_argument(
        "--load-on-cpu", action="store_true", help="pin the busy processes to the triage's CPU (else any CPU)"
    )
    parser.add_argument("--out", type=Path, help="a JSON lines file of every trial")
    parser.add_argument("--keep", type=Path, help="a folder for each trial's triage report (summary.md)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cpu = max(os.sched_getaffinity(0)) if args.cpu is None else args.cpu
    counts: dict[str, dict[str, int]] = {}
    minutes: dict[str, list[float]] = {}
    for condition, trials in (("quiet", args.quiet), ("loaded", args.loaded)):
        for index in range(trials):
            busy = load(args.load, cpu if args.load_on_cpu else None)
            loaded = busy if condition == "loaded" else contextlib.nullcontext()
            with tempfile.TemporaryDirectory(prefix="triage-trial-") as scratch, loaded:
                found = trial(Path(scratch), rng, args.rounds, str(cpu), args.keep)
            found |= {"condition": condition, "trial": index + 1, "seed": args.seed, "cpu": cpu}
            counts.setdefault(condition, {"right": 0, "wrong": 0, "none": 0})[str(found["verdict"])] += 1
            minutes.setdefault(condition, []).append(float(found["minutes"]))  # type: ignore[arg-type]
            print(json.dumps(found), flush=True)
            if args.out:
                with args.out.open("a") as out:
                    out.write(json.dumps(found) + "\n")
    for condition, count in counts.items():
        total = sum(count.values())
        print(
            f"{condition}: {count['right']}/{total} right, {count['wrong']} wrong, "
            f"{count['none']} no culprit; median {statistics.median(minutes[condition]):.1f} min a trial"
        )
    return 1 if any(count["wrong"] for count in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
