"""One recipe trained by every backend, side by side: native (jaxbench's Flax model and loop), MaxText's,
Levanter's and Pax's own trainers, in rounds that alternate the backends so that the machine's drift lands
on all of them alike. Each run is a fresh `jaxbench run` process writing a normal result file.

Prints, per backend, the median over rounds of the runs' median step times, their range, the median
within-run IQR, throughput, compile time, final loss and the ratio to native. The default shape is big
enough that the frameworks' per-step loop overheads do not dominate (docs/measurements.md).

    .venv/bin/python benchmarks/backends_side_by_side.py                     # the default shape, 3 rounds
    .venv/bin/python benchmarks/backends_side_by_side.py --size 1b --set train.remat=full \
        --set train.attention=xla      # on a GPU (Pax has no cuDNN attention, Levanter no dots_no_batch)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

PROJECT = Path(__file__).resolve().parent.parent
DEFAULT_SET = [
    "model.d_model=256",
    "model.num_heads=8",
    "model.num_kv_heads=4",
    "model.ffn_dim=704",
    "model.seq_len=128",
    "train.steps=30",
]


def run_once(backend: str, args: argparse.Namespace, out: Path) -> dict[str, object]:
    overrides = [item for value in args.set for item in ("--set", value)]
    command = [
        str(PROJECT / ".venv" / "bin" / "jaxbench"),
        "run",
        args.recipe,
        "--size",
        args.size,
        *overrides,
        "--backend",
        backend,
        "--out",
        str(out),
        "--no-ingest",
    ]
    before = set(out.glob("*.json"))
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    written = sorted(set(out.glob("*.json")) - before)
    if not written:
        sys.exit(f"{backend}: no result ({done.returncode}):\n{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(written[-1].read_text())
    if result["status"] != "ok":
        sys.exit(f"{backend}: {result['status']}: {result['reason']}")
    return result


def summarize(runs: list[dict[str, object]]) -> dict[str, float]:
    medians = [r["timing"]["step_time_s"]["median"] for r in runs]  # type: ignore[index]
    iqrs = [r["timing"]["step_time_s"]["iqr"] for r in runs]  # type: ignore[index]
    return {
        "median": statistics.median(medians),
        "low": min(medians),
        "high": max(medians),
        "iqr": statistics.median(iqrs),
        "tokens_per_s": statistics.median(r["throughput"]["per_s"] for r in runs),  # type: ignore[index]
        "compile_s": statistics.median(r["timing"]["compile_s"] or 0.0 for r in runs),  # type: ignore[index]
        "loss": statistics.median(r["loss"]["final_window"] for r in runs),  # type: ignore[index]
        "optimal": runs[0]["loss"]["optimal"],  # type: ignore[index]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="llama2")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--set", action="append", default=None, metavar="KEY=VALUE")
    parser.add_argument("--backends", default="native,maxtext,levanter,pax")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    args.set = DEFAULT_SET if args.set is None else args.set
    backends = args.backends.split(",")
    runs: dict[str, list[dict[str, object]]] = {b: [] for b in backends}
    console = Console(width=150)
    with tempfile.TemporaryDirectory(prefix="jaxbench-side-by-side-") as scratch:
        for round_index in range(args.rounds):
            order = backends[round_index % len(backends) :] + backends[: round_index % len(backends)]
            for backend in order:
                result = run_once(backend, args, Path(scratch))
                runs[backend].append(result)
                step = result["timing"]["step_time_s"]["median"]  # type: ignore[index]
                console.print(f"round {round_index + 1} {backend}: median step {step * 1e3:.1f} ms")
    stats = {b: summarize(r) for b, r in runs.items()}
    first = runs[backends[0]][0]
    table = Table(title=f"{first['recipe']['name']} with {' '.join(args.set)}, {args.rounds} rounds")  # type: ignore[index]
    for column in (
        "backend",
        "step (median)",
        "range over rounds",
        "IQR in run",
        "tokens/s",
        "compile",
        "loss",
        "vs native",
    ):
        table.add_column(column, justify="left" if column == "backend" else "right")
    native = stats.get("native")
    for backend, s in stats.items():
        ratio = f"{s['median'] / native['median']:.2f}x" if native else "-"
        table.add_row(
            backend,
            f"{s['median'] * 1e3:.1f} ms",
            f"{s['low'] * 1e3:.1f}-{s['high'] * 1e3:.1f} ms",
            f"{s['iqr'] * 1e3:.2f} ms",
            f"{s['tokens_per_s']:,.0f}",
            f"{s['compile_s']:.1f} s",
            f"{s['loss']:.3f} (opt {s['optimal']:.3f})",
            ratio,
        )
    console.print(table)


if __name__ == "__main__":
    main()
