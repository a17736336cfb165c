"""The edges of a triage on this machine: a stack is the harness's virtualenv with the moved pure-Python
components overlaid at the commits asked for (containers/overlay.py), a measurement is one `jaxbench run` of
the incident's benchmark in a fresh process inside it, and a component's commits come from its repository
(a bare mirror kept under the work folder).

Compiled components (jax's jaxlib, XLA, TransformerEngine) cannot be overlaid at a commit: that needs an
image build per commit, which this module refuses by name rather than measure the wrong stack. They move by
release instead where the runs recorded two versions (triage/wheels.py): a stack then holds their wheels.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from jaxbench.containers.git import git_argument, git_repository, run_git
from jaxbench.containers.overlay import Pin, create_overlay
from jaxbench.containers.wheel_overlay import create_wheel_overlay
from jaxbench.core.errors import ExternalFailure, InvalidInput, RunFailed
from jaxbench.core.processes import run_child
from jaxbench.triage.stacks import INSTALL_FAILED, Measurement, Move, is_program_label
from jaxbench.triage.wheels import Releases

COMPILED = frozenset({"xla", "jax", "jaxlib", "transformer-engine", "transformer_engine"})
"""Components built with jax's or TE's compiler toolchain: bisecting them needs an image build per commit.
jax itself is pure Python but is built into the same wheel set as jaxlib here (build: with-jax)."""

RUN_TIMEOUT_S = 3600.0


def not_overlayable(move: Move) -> str | None:
    """Why this component cannot be put at another commit here, or None when it can."""
    if move.name in COMPILED:
        return "compiled: its probes need an image build per commit"
    if not move.repository or not move.good or not move.bad:
        return "no repository and commits recorded"
    return None


def family_and_size(config: Mapping[str, Any]) -> tuple[str, str]:
    """The recipe family and size a stored run's configuration names, or a refusal."""
    family, size = config.get("family"), config.get("size")
    if not isinstance(family, str) or not isinstance(size, str):
        raise InvalidInput("the incident's run records no recipe family and size to run again")
    return family, size


def recipe_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """A recipe file whose one size resolves to exactly this stored configuration (the resolved recipe a
    run records, overrides included), so that a rerun has the incident runs' recipe hash."""
    family, size = family_and_size(config)
    settings = {key: value for key, value in config.items() if key not in ("family", "size", "description")}
    # Every recipe file must have a tiny size; an empty one is never run here unless it is the size.
    return {
        "family": family,
        "description": config.get("description", ""),
        "default_size": size,
        "base": settings,
        "sizes": {size: {}, "tiny": {}},
    }


class Benchmark:
    """`jaxbench run` of the incident runs' configuration (from the store, as a recipe file), in overlays
    under `work`."""

    def __init__(
        self,
        work: Path,
        *,
        config: Mapping[str, Any],
        config_hash: str | None,
        moves: Mapping[str, Move],
        base_manifest: Mapping[str, Any] | None,
        environ: Mapping[str, str] | None = None,
        timeout_s: float = RUN_TIMEOUT_S,
        prefix: Sequence[str] = (),
        one_cpu: bool = False,
        releases: Releases | None = None,
    ) -> None:
        self.work, self.config_hash = work, config_hash
        self.size = str(config.get("size"))
        train = config.get("train")
        self.warmup_steps = int(train.get("warmup_steps", 0)) if isinstance(train, Mapping) else 0
        self.recipe = work / "recipe.yaml"
        work.mkdir(parents=True, exist_ok=True)
        self.recipe.write_text(yaml.safe_dump(recipe_of(config), sort_keys=False))
        self.moves, self.base_manifest = moves, base_manifest
        self.environ = dict(os.environ if environ is None else environ)
        self.timeout_s = timeout_s
        self.prefix = tuple(prefix)
        """What each run's command line starts with (taskset -c CPUS)."""
        self.one_cpu = one_cpu
        """Each run is confined to one CPU: only then is its process's CPU time per step the step's work less
        what other processes took (on several CPUs, a change in how the step spreads over them shows in its
        wall time alone), so only then do its measurements carry CPU time as a clock."""
        self.releases = releases
        """Where the wheels of the components that move by release come from."""

    def stack(self, pins: Mapping[str, str]) -> dict[str, str]:
        """The environment of the stack with these commits and releases (an overlay per distinct set, made
        once): the components at commits built from their repositories, in front of them the wheels of
        those that move by release."""
        key = hashlib.sha256(json.dumps(sorted(pins.items())).encode()).hexdigest()[:16]
        commits = {name: pin for name, pin in pins.items() if self.moves[name].by == "commit"}
        versions = {name: pin for name, pin in pins.items() if self.moves[name].by == "release"}
        environ: dict[str, str] = {}
        manifest = self.base_manifest
        if commits:
            overlay = create_overlay(
                {name: Pin(self.moves[name].repository, commit) for name, commit in commits.items()},
                self.work / "stacks" / key,
                base_manifest=self.base_manifest,
            )
            environ, manifest = overlay.environ(), yaml.safe_load(overlay.manifest.read_text())
        if versions:
            assert self.releases is not None, "a move by release needs the releases it comes from"
            wheels = create_wheel_overlay(
                self.releases.pins(versions),
                self.work / "stacks" / f"{key}-wheels",
                components=self.releases.components,
                base_manifest=manifest,
            )
            path = os.pathsep.join(filter(None, [str(wheels.site), environ.get("PYTHONPATH", "")]))
            environ = wheels.environ() | {"PYTHONPATH": path}
        return environ

    def __call__(self, label: str, pins: Mapping[str, str], attempt: int) -> Measurement:
        started = time.monotonic()
        try:
            environ = self.environ | self.stack(pins)
        except RunFailed as error:
            # A commit that does not even install is a result of the probe, not the end of the triage.
            return Measurement(INSTALL_FAILED, reason=str(error), seconds=time.monotonic() - started)
        arguments = ["run", str(self.recipe), "--size", self.size]
        if is_program_label(label):
            # Its compiled program is what counts: one step past the warmup, the least a run takes.
            arguments += ["--steps", str(self.warmup_steps + 1)]
        measurement = run_measured(
            arguments,
            environ=environ,
            out=self.work / "runs" / folder_name(label) / str(attempt),
            timeout_s=self.timeout_s,
            prefix=self.prefix,
            check=(lambda path, result: None) if is_program_label(label) else self._same_configuration,
            started=started,
        )
        return measurement if self.one_cpu else dataclasses.replace(measurement, median_cpu_step_s=None)

    def _same_configuration(self, path: Path, result: Mapping[str, Any]) -> None:
        recipe_hash = (result.get("recipe") or {}).get("hash")
        if self.config_hash is not None and recipe_hash != self.config_hash:
            raise InvalidInput(
                f"{path}: the rerun's configuration (recipe hash {str(recipe_hash)[:12]}) is not the "
                f"incident runs' ({self.config_hash[:12]}): this checkout's harness resolves the recipe "
                "differently; triage from the checkout the nightly ran"
            )


def run_measured(
    arguments: Sequence[str],
    *,
    environ: Mapping[str, str],
    out: Path,
    timeout_s: float = RUN_TIMEOUT_S,
    python: str = sys.executable,
    prefix: Sequence[str] = (),
    cwd: Path | None = None,
    check: Callable[[Path, Mapping[str, Any]], None] = lambda path, result: None,
    started: float | None = None,
) -> Measurement:
    """`jaxbench ARGUMENTS` (a run) in a fresh process of `python` (after `prefix`, such as taskset) with
    `environ`, its result written to `out` and not ingested; what it measured, or how it failed. `check` may
    refuse the result it wrote."""
    started = time.monotonic() if started is None else started
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.json"):
        stale.unlink()  # an interrupted attempt's result: this attempt runs again from the start
    command = [
        *prefix,
        python,
        "-m",
        "jaxbench",
        *arguments,
        "--out",
        str(out),
        "--no-ingest",
        "--no-keep-hlo",
    ]
    try:
        # On Ctrl-C or SIGTERM the run is passed the signal and writes its interrupted result before this
        # command stops (core/processes.py): no run is left behind.
        done = run_child(command, env=environ, cwd=cwd, capture=True, timeout_s=timeout_s)
    except subprocess.TimeoutExpired:
        return Measurement("timeout", reason=f"no result after {timeout_s:g} s", seconds=timeout_s)
    seconds = time.monotonic() - started
    results = sorted(out.glob("*.json"))
    if not results:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return Measurement("no-result", reason=" | ".join(tail) or f"exit {done.returncode}", seconds=seconds)
    try:
        result = json.loads(results[-1].read_text())
    except (OSError, ValueError) as error:
        raise ExternalFailure(f"{results[-1]}: unreadable result: {error}") from error
    check(results[-1], result)
    return measurement_of(result, results[-1], seconds)


def measurement_of(result: Mapping[str, Any], path: Path, seconds: float) -> Measurement:
    """What triage and pr-check read of a run's result file."""
    timing = result.get("timing") or {}
    loss = result.get("loss") or {}
    program = result.get("program")
    on_cpu = ((result.get("provenance") or {}).get("devices") or {}).get("platform") == "cpu"
    return Measurement(
        status=str(result.get("status")),
        median_step_s=(timing.get("step_time_s") or {}).get("median"),
        loss_curve=tuple(loss["per_step"]) if loss.get("per_step") else None,
        loss_optimum=loss.get("optimal"),
        program={k: v for k, v in program.items() if k != "hlo_file"} if program else None,
        reason=result.get("reason"),
        result_path=str(path),
        seconds=seconds,
        cpu_per_wall=timing.get("cpu_per_wall"),
        median_cpu_step_s=(timing.get("cpu_step_time_s") or {}).get("median") if on_cpu else None,
    )


def folder_name(label: str) -> str:
    """`label` (a stack, a benchmark) as one plain file name: no separator, so no path."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)[:80]


class Mirrors:
    """Bare mirrors of the components' repositories under `root`, fetched once per triage; a component that
    moves by release walks its releases instead."""

    def __init__(self, root: Path, releases: Releases | None = None) -> None:
        self.root = root
        self.releases = releases

    def __call__(self, move: Move) -> list[str]:
        if move.by == "release":
            assert self.releases is not None, "a move by release needs the releases it comes from"
            return self.releases.between(move)
        git = mirror(self.root, move.name, move.repository)
        what = f"{move.name}'s repository {move.repository}"
        good, bad = (commit_of(git, pin, move.name, move.repository) for pin in (move.good, move.bad))
        if run_git([*git, "merge-base", good, bad], what).strip() != good:
            raise InvalidInput(
                f"{move.name}: the last good pin {good[:12]} is not an ancestor of the first bad "
                f"{bad[:12]}: nothing linear to bisect"
            )
        # First parents only, as upstream's main branch saw them land: a merged branch is one step.
        between = run_git([*git, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}"], what)
        return [good, *between.split()]


def mirror(root: Path, name: str, repository: str) -> list[str]:
    """The git arguments (`--git-dir DIR`) of a bare mirror of component `name`'s `repository` under
    `root`: cloned the first time, every ref fetched again after."""
    folder = root / f"{folder_name(name)}.git"
    what = f"{name}'s repository {repository}"
    if folder.exists():
        refresh = ["--git-dir", str(folder), "fetch", "--quiet", "--force", "origin", "+refs/*:refs/*"]
        run_git(refresh, what)
    else:
        folder.parent.mkdir(parents=True, exist_ok=True)
        source = git_repository(repository, f"components.{name}.repository")
        run_git(["clone", "--quiet", "--mirror", "--", source, str(folder)], what)
    return ["--git-dir", str(folder)]


def commit_of(git: Sequence[str], ref: str, name: str, repository: str) -> str:
    """The full commit id `ref` (a commit, branch or tag) names in the repository, or a refusal naming it."""
    revision = f"{git_argument(ref, f'{name} ref')}^{{commit}}"
    try:
        return run_git([*git, "rev-parse", "--verify", "--quiet", revision], f"{name} {ref}").strip()
    except ExternalFailure:
        raise InvalidInput(f"{name}: {ref} is not a commit of {repository}") from None
