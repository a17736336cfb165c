"""The harness's subcommands for the `jaxbench` command: their arguments, and the typed options they become.

    jaxbench run llama2 --size tiny --steps 8

`run` and `microbench` are composed from outside (jaxbench/wiring.py): which launchers exist (some run our
images, which the containers package builds) and where results go (the store, which is the results
package). Nothing here imports a backend, jax or flax: the commands import what they need when they run.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from jaxbench.core.cli import AddArguments, Handler, Subcommand, whole_number
from jaxbench.core.json_output import add_json_option
from jaxbench.harness.backends import BACKENDS
from jaxbench.harness.gpucheck import DEFAULT_STEPS as GPU_CHECK_STEPS
from jaxbench.harness.launch import (
    ClusterRequest,
    LauncherFactory,
    LaunchOptions,
    ResultSink,
    choose,
    no_sink,
)
from jaxbench.harness.microbench import SIZE_SETS
from jaxbench.harness.runtime.options import (
    DEFAULT_BACKEND,
    DEFAULT_PROFILE_STEPS,
    RunOptions,
    Schedule,
    profile_steps,
)


@dataclasses.dataclass(frozen=True)
class RunWiring:
    """What `run` and `microbench` need from the packages above the harness."""

    launchers: Mapping[str, LauncherFactory]
    """Launcher name -> factory; `local` is the default, `image` when --image is given."""
    sink: ResultSink
    """Where each result file goes unless --no-ingest."""


def _add_recipe_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", help="recipe name (llama2, gpt3, vit) or path to a recipe YAML file")
    parser.add_argument(
        "--size", help="named size; default: tiny without a GPU, the recipe's default_size with one"
    )
    parser.add_argument(
        "--steps", type=whole_number, help="total steps, warmup included (same as --set train.steps=N)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override any recipe field, validated like the file (repeatable)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("runs"), help="folder for result JSON (default: runs)"
    )
    parser.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        choices=sorted(BACKENDS),
        help=f"who trains the recipe (default: {DEFAULT_BACKEND}, jaxbench's own Flax models)",
    )
    parser.add_argument(
        "--drop-unknown-flags",
        action="store_true",
        help="run without XLA flags the installed jaxlib does not know (recorded in the result)",
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        type=whole_number,
        const=DEFAULT_PROFILE_STEPS,
        metavar="STEPS",
        help=f"after the timed steps, run STEPS more (default {DEFAULT_PROFILE_STEPS}) under the JAX "
        "profiler: the trace beside the result, and where the time went in it",
    )
    parser.add_argument(
        "--keep-hlo",
        action=argparse.BooleanOptionalAction,
        help="keep the compiled step's optimized HLO, gzip-compressed, beside the result (default: for "
        "--nightly runs); its fingerprint and summary are in the result either way",
    )


def _run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(
        args.recipe,
        size=args.size,
        steps=args.steps,
        overrides=tuple(args.overrides),
        out_dir=args.out,
        drop_unknown_flags=args.drop_unknown_flags,
        backend=args.backend,
        keep_hlo=args.keep_hlo,
        profile_steps=profile_steps(args.profile),
    )


def _add_flops(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe")
    parser.add_argument("--size", help="named size (default: the recipe's default_size)")
    parser.add_argument(
        "--seq", type=whole_number, help="sequence length to count attention for (language models)"
    )
    add_json_option(parser)


def _flops(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness import commands

    return commands.show_flops(commands.FlopsOptions(args.recipe, args.size, args.seq, args.json), console)


def _add_profile(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", nargs="?")
    add_json_option(parser)


def _flags_show(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness import commands

    return commands.flags_show(args.profile, console, as_json=args.json)


def _add_flag_string(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("flags", nargs="?")
    add_json_option(parser)


def _flags_check(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness import commands

    return commands.flags_check(args.flags, console, as_json=args.json)


def _add_two_flag_sets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a")
    parser.add_argument("b")
    add_json_option(parser)


def _flags_diff(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness import commands

    return commands.flags_diff(args.a, args.b, console, as_json=args.json)


FLAGS_COMMANDS = (
    Subcommand("show", "a profile as resolved on this machine (default: auto)", _add_profile, _flags_show),
    Subcommand(
        "check", "a profile or flags (default: your XLA_FLAGS) against jaxlib", _add_flag_string, _flags_check
    ),
    Subcommand("diff", "what differs between two profiles or flag strings", _add_two_flag_sets, _flags_diff),
)


def _add_run(launchers: Mapping[str, LauncherFactory]) -> AddArguments:
    def add(parser: argparse.ArgumentParser) -> None:
        _add_recipe_options(parser)
        parser.add_argument(
            "--launcher",
            choices=list(launchers),
            help="where the run happens (default: local, or image when --image is given)",
        )
        parser.add_argument(
            "--image",
            help="run inside this jaxbench image (GPUs passed through); the result comes back to --out. With "
            "--launcher slurm each task runs in it (pyxis); k8s needs it, for every pod",
        )
        parser.add_argument(
            "--no-ingest", action="store_true", help="do not add the result to the store (JAXBENCH_DB)"
        )
        _add_nightly(parser)
        cluster = parser.add_argument_group("cluster launchers (--launcher slurm, --launcher k8s)")
        cluster.add_argument("--nodes", type=whole_number, default=1, help="hosts of the job (default 1)")
        cluster.add_argument(
            "--tasks-per-node",
            type=whole_number,
            help="processes per host (slurm; default: one per GPU, else one); k8s runs one per pod",
        )
        cluster.add_argument("--gpus-per-node", type=whole_number, help="GPUs asked for on each host")
        cluster.add_argument("--partition", help="the SLURM partition (slurm only)")
        cluster.add_argument("--account", help="the SLURM account (slurm only)")
        cluster.add_argument(
            "--time", help="the job's time limit, as sbatch takes it (30, 1:30:00); k8s: each pod's deadline"
        )
        cluster.add_argument(
            "--namespace", help="the Kubernetes namespace (k8s only; default: the KUBECONFIG context's)"
        )
        cluster.add_argument(
            "--dry-run", action="store_true", help="print the batch script or JobSet manifest, submit nothing"
        )

    return add


def _add_nightly(parser: argparse.ArgumentParser) -> None:
    schedule = parser.add_mutually_exclusive_group()
    schedule.add_argument(
        "--nightly",
        action="store_true",
        help="a run of the nightly plan: judged by `jaxbench detect` (default: ad hoc, only reported)",
    )
    schedule.add_argument(
        "--backfill",
        action="store_true",
        help="a past release's run on its release night (`jaxbench backfill`): judged like --nightly",
    )


def _schedule(args: argparse.Namespace) -> Schedule:
    if args.backfill:
        return Schedule.BACKFILL
    return Schedule.NIGHTLY if args.nightly else Schedule.AD_HOC


def _run(wiring: RunWiring) -> Handler:
    def run(args: argparse.Namespace, console: Console) -> int:
        from jaxbench.harness import commands

        options = dataclasses.replace(_run_options(args), schedule=_schedule(args))
        commands.refuse_overlay_elsewhere(options.backend, args.image, os.environ)
        where = LaunchOptions(
            args.launcher or ("image" if args.image else "local"),
            image=args.image,
            cluster=ClusterRequest(
                nodes=args.nodes,
                tasks_per_node=args.tasks_per_node,
                gpus_per_node=args.gpus_per_node,
                partition=args.partition,
                account=args.account,
                time=args.time,
            ),
            dry_run=args.dry_run,
            namespace=args.namespace,
        )
        launcher = choose(where, wiring.launchers)
        return commands.run_recipe(options, launcher, no_sink if args.no_ingest else wiring.sink, console)

    return run


def _add_ab(parser: argparse.ArgumentParser) -> None:
    _add_recipe_options(parser)
    parser.add_argument(
        "--a", required=True, help="flag profile name, or flags: --a='--xla_foo=1 --xla_bar=2'"
    )
    parser.add_argument("--b", required=True, help="flag profile name, or flags: --b='--xla_foo=1'")
    parser.add_argument("--repeats", type=whole_number, default=3, help="runs per arm (default 3)")


def _ab(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness import commands

    return commands.ab_compare(commands.ABOptions(_run_options(args), args.a, args.b, args.repeats), console)


def _add_microbench(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes", choices=SIZE_SETS, help="tiny (CPU, under a minute) or full; default: full on a GPU"
    )
    parser.add_argument("-k", dest="keyword", help="only benchmarks matching this pytest -k expression")
    parser.add_argument("--out", type=Path, default=Path("runs"), help="folder for the JSON (default: runs)")
    parser.add_argument("--no-ingest", action="store_true", help="do not add the results to the store")
    _add_nightly(parser)


def _microbench(wiring: RunWiring) -> Handler:
    def microbench(args: argparse.Namespace, console: Console) -> int:
        from jaxbench.harness import commands

        options = commands.MicrobenchOptions(args.sizes, args.keyword, args.out, _schedule(args))
        return commands.microbench(options, no_sink if args.no_ingest else wiring.sink, console)

    return microbench


def _add_gpu_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps",
        type=whole_number,
        default=GPU_CHECK_STEPS,
        help=f"steps per recipe run, warmup included (default {GPU_CHECK_STEPS}, for the 9-minute budget)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("runs"), help="folder for gpu-check-<UTC time>/ (default: runs)"
    )


def _gpu_check(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness.gpucheck import check

    return check.gpu_check(check.GpuCheckOptions(args.out, args.steps), console)


def _recipes(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness import commands

    return commands.list_recipes(console, as_json=args.json)


def _add_backends(parser: argparse.ArgumentParser) -> None:
    shown = parser.add_mutually_exclusive_group()
    add_json_option(shown)
    shown.add_argument(
        "--frameworks",
        action="store_true",
        help="print only the framework backends' names, one a line (each trains in its own .venv-<name>)",
    )


def _backends(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness import commands

    return commands.list_backends(console, as_json=args.json, frameworks_only=args.frameworks)


def _add_smoke(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("runs/smoke"), help="folder for the results (default: runs/smoke)"
    )
    parser.add_argument("--image", help="run inside this jaxbench image (jaxbench run --image)")
    parser.add_argument(
        "--backends",
        nargs="+",
        default=[],
        metavar="BACKEND",
        help="the backends to smoke (default: every one; inside an image, those every image holds)",
    )
    parser.add_argument(
        "--recipes",
        nargs="+",
        default=[],
        metavar="RECIPE",
        help="only these recipes of those the backends train (default: all of them)",
    )


def _smoke(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.harness.smoke import SmokeOptions, smoke

    return smoke(SmokeOptions(args.out, args.image, tuple(args.backends), tuple(args.recipes)), console)


def subcommands(wiring: RunWiring) -> list[Subcommand]:
    """In workflow order: inspect the recipes and flags, run, compare, drill into kernels."""
    return [
        Subcommand("recipes", "list recipe families and sizes", add_json_option, _recipes),
        Subcommand(
            "backends",
            "who can train the recipes: jaxbench's own models and the frameworks",
            _add_backends,
            _backends,
        ),
        Subcommand(
            "flops", "parameter count and training FLOPs per token (per image for ViT)", _add_flops, _flops
        ),
        Subcommand(
            "flags", "XLA flag profiles: show, check against jaxlib, diff", subcommands=FLAGS_COMMANDS
        ),
        Subcommand(
            "run",
            "train a recipe for a few steps and report standardized numbers",
            _add_run(wiring.launchers),
            _run(wiring),
        ),
        Subcommand("ab", "A/B two flag sets: alternating runs, throughput ratio and verdict", _add_ab, _ab),
        Subcommand(
            "microbench",
            "kernel and collective microbenchmarks (pytest-benchmark), ingested into the store",
            _add_microbench,
            _microbench(wiring),
        ),
        Subcommand(
            "smoke",
            "each backend's tiny size of each recipe it trains, on the CPU: does the stack train at all",
            _add_smoke,
            _smoke,
        ),
        Subcommand(
            "gpu-check",
            "the acceptance run of a GPU machine: each recipe and the microbenchmarks, one summary",
            _add_gpu_check,
            _gpu_check,
        ),
    ]
