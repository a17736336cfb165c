"""`jaxbench smoke`: its plan from the registries' view of the backends, and its runs, each a fresh
`jaxbench run` on the CPU, stopping at the first that fails.

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_smoke.py
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.catalog import BackendView, backend_views
from jaxbench.harness.smoke import SmokeOptions, SmokeRun, smoke, smoke_plan

VIEWS = [
    BackendView("native", False, None, ("llama2", "vit"), ("llama2", "vit")),
    BackendView("maxtext", True, "maxtext", ("llama2",), ("llama2",)),
    BackendView("idle", True, "idle", ("mamba",), ()),
]


def test_the_plan_is_each_backend_by_each_recipe_it_trains() -> None:
    native = [SmokeRun("native", "llama2"), SmokeRun("native", "vit")]
    assert smoke_plan(VIEWS, SmokeOptions()) == [*native, SmokeRun("maxtext", "llama2")]
    # Inside an image only what every image holds, unless the framework is named (its own image).
    assert smoke_plan(VIEWS, SmokeOptions(image="img")) == native
    named = smoke_plan(VIEWS, SmokeOptions(image="img", backends=("maxtext", "native")))
    assert named == [SmokeRun("maxtext", "llama2"), *native]


def test_the_shipped_plan_covers_every_backend() -> None:
    plan = smoke_plan(backend_views(), SmokeOptions())
    assert {run.backend for run in plan} == {"native", "maxtext", "levanter", "pax"}
    assert {run.recipe for run in plan if run.backend == "native"} == {"llama2", "gpt3", "vit"}


def test_an_unknown_backend_is_refused_before_any_run() -> None:
    with pytest.raises(InvalidInput, match=r"--backends nope: expected some of native, maxtext, idle"):
        smoke_plan(VIEWS, SmokeOptions(backends=("native", "nope")))


def test_only_the_recipes_asked_for_are_smoked() -> None:
    plan = smoke_plan(VIEWS, SmokeOptions(recipes=("llama2",)))
    assert plan == [SmokeRun("native", "llama2"), SmokeRun("maxtext", "llama2")]
    with pytest.raises(InvalidInput, match=r"--recipes mamba: expected some of llama2, vit"):
        smoke_plan(VIEWS, SmokeOptions(recipes=("llama2", "mamba")))


def _smoke(
    options: SmokeOptions, codes: dict[str, int]
) -> tuple[int, list[list[str]], list[Mapping[str, str]]]:
    argvs: list[list[str]] = []
    envs: list[Mapping[str, str]] = []

    def runner(argv: Sequence[str], env: Mapping[str, str]) -> int:
        argvs.append(list(argv))
        envs.append(env)
        return codes.get(f"{argv[argv.index('--backend') + 1]} {argv[4]}", 0)

    console = Console(file=io.StringIO())
    return smoke(options, console, views=VIEWS, runner=runner, environ={"PATH": "/bin"}), argvs, envs


def test_each_run_is_a_tiny_cpu_run_not_ingested(tmp_path: Path) -> None:
    code, argvs, envs = _smoke(SmokeOptions(out=tmp_path / "smoke", image="img"), {})
    assert code == 0
    out = str(tmp_path / "smoke")
    assert [" ".join(argv[3:]) for argv in argvs] == [
        f"run {recipe} --size tiny --backend native --no-ingest --out {out} --image img"
        for recipe in ("llama2", "vit")
    ]
    assert all(env == {"PATH": "/bin", "JAX_PLATFORMS": "cpu"} for env in envs)


def test_the_first_failure_stops_the_smoke_with_its_exit_code(tmp_path: Path) -> None:
    code, argvs, _ = _smoke(SmokeOptions(out=tmp_path), {"native vit": 3})
    assert code == 3
    assert [argv[4] for argv in argvs] == ["llama2", "vit"]  # maxtext never started


def test_an_output_below_a_file_is_refused_before_any_run(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidInput, match="--out"):
        _smoke(SmokeOptions(out=tmp_path / "file" / "smoke"), {})
    assert not (tmp_path / "smoke").exists()
