"""The nightly's plan: dispatch inputs → date, registry and job matrices, and bad inputs named in seconds.

JAX_PLATFORMS=cpu python -m pytest -q tests/nightly/test_nightly_plan.py
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.core.errors import InvalidInput
from jaxbench.nightly.commands import nightly_plan
from jaxbench.nightly.matrix import BackendPlan, NightlyInputs, plan_nightly

FLAVORS = ["jax", "maxtext", "cpu"]
RECIPES = {"llama2": ("7b", ["tiny", "1b", "7b"]), "vit": ("b16", ["tiny", "b16"])}
LATE = dt.datetime(2026, 11, 22, 23, 59, tzinfo=dt.UTC)


def plan(**inputs: object) -> dict[str, object]:
    inputs.setdefault("registry_owner", "JaxBench")
    outputs = plan_nightly(NightlyInputs(**inputs), flavors=FLAVORS, recipes=RECIPES, now=LATE).outputs()  # type: ignore[arg-type]
    return {k: json.loads(v) if v[:1] in "[{" else v for k, v in outputs.items()}


def test_defaults_build_every_flavor_on_both_arches_and_benchmark_nothing() -> None:
    out = plan()
    assert out["date"] == "2026-11-22"
    assert out["registry"] == "ghcr.io/jaxbench"  # GHCR wants lower case
    assert out["arches"] == "amd64,arm64"
    builds = out["build"]["include"]  # type: ignore[index]
    assert [(b["flavor"], b["arch"]) for b in builds] == [(f, a) for f in FLAVORS for a in ("amd64", "arm64")]
    assert {tuple(b["runner"]) for b in builds if b["arch"] == "arm64"} == {("ubuntu-24.04-arm",)}
    # No GPU runners configured: no benchmark job would wait for a runner that never comes.
    assert out["bench"] == {"include": []} and out["has-bench"] == "false"
    assert out["bench-flavor"] == "jax"


def test_benchmark_matrix_is_recipes_by_sizes_by_hardware() -> None:
    runners = {
        "h100": ["self-hosted", "h100"],
        "gh200": {"labels": ["self-hosted", "gh200"], "arch": "arm64"},
        "h100x4": {
            "labels": ["slurm-login"],
            "nodes": 4,
            "gpus_per_node": 8,
            "partition": "batch",
            "time": "2:00:00",
        },
    }
    out = plan(benchmarks="llama2 vit:tiny, llama2", bench_runners=json.dumps(runners))
    bench = out["bench"]["include"]  # type: ignore[index]
    assert [(j["recipe"], j["size"], j["hardware"], j["arch"]) for j in bench] == [
        ("llama2", "7b", "h100", "amd64"),
        ("vit", "tiny", "h100", "amd64"),
        ("llama2", "7b", "gh200", "arm64"),
        ("vit", "tiny", "gh200", "arm64"),
    ]
    assert bench[0]["runner"] == ["self-hosted", "h100"]
    multinode = out["multinode"]["include"]  # type: ignore[index]
    assert [(j["recipe"], j["nodes"]) for j in multinode] == [("llama2", 4), ("vit", 4)]
    # What the workflow passes on to `jaxbench run --launcher slurm`: an unset one is empty, and left out.
    slurm = {key: multinode[0][key] for key in ("gpus_per_node", "partition", "account", "time")}
    assert slurm == {"gpus_per_node": 8, "partition": "batch", "account": "", "time": "2:00:00"}
    assert "partition" not in bench[0]
    assert out["has-bench"] == "true" and out["has-multinode"] == "true"


def test_trial_runs_go_to_their_own_registry() -> None:
    trial = plan(publish=False)
    assert (trial["registry"], trial["publish"]) == ("ghcr.io/jaxbench/trial", "false")
    assert plan()["publish"] == "true"


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"flavors": "cpu,jaxx"}, r"^flavors: jaxx: expected some of jax, maxtext, cpu"),
        ({"arches": "riscv64"}, r"^arches: riscv64: expected some of amd64, arm64"),
        ({"benchmarks": "gpt9"}, r"^benchmarks: gpt9: no recipe 'gpt9'"),
        ({"benchmarks": "llama2:70b"}, r"^benchmarks: llama2:70b: recipe llama2 has no size '70b'"),
        ({"bench_flavor": "pax"}, r"^bench-flavor: pax is not among the flavors built tonight"),
        ({"flavors": "cpu"}, r"^bench-flavor: jax is not among the flavors built tonight \(cpu\)"),
        ({"bench_runners": "{oops"}, r"^bench-runners: not valid JSON: Expecting property name"),
        ({"bench_runners": '{"h100": []}'}, r"^bench-runners: h100\.labels: List should have at least 1"),
        ({"bench_runners": '{"h100": ["a b"]}'}, r"^bench-runners: h100\.labels\.0: String should match"),
        ({"bench_runners": '{"h": {"labels": ["a"], "gpus": 8}}'}, r"^bench-runners: h\.gpus: Extra inputs"),
        ({"bench_runners": '{"h": {"labels": ["a"], "nodes": 0}}'}, r"^bench-runners: h\.nodes: .*greater"),
        (
            {"bench_runners": '{"h": {"labels": ["a"], "nodes": 2, "partition": "a b"}}'},
            r"^bench-runners: h\.partition: Value error, --partition 'a b': expected a SLURM name",
        ),
        (
            {"bench_runners": '{"h": {"labels": ["a"], "nodes": 2, "time": "2h"}}'},
            r"^bench-runners: h\.time: Value error, --time '2h': expected minutes, MM:SS",
        ),
        (
            {"bench_runners": '{"h": {"labels": ["a"], "account": "lab"}}'},
            r"^bench-runners: h: Value error, account: only for multi-node classes",
        ),
        (
            {"arches": "amd64", "bench_runners": '{"gh": {"labels": ["a"], "arch": "arm64"}}'},
            r"^bench-runners: gh\.arch: arm64 is not among the arches built tonight \(amd64\)",
        ),
        ({"build_runners": '{"amd64": ["x"]}'}, r"^build-runners: no runner labels for arm64"),
        ({"registry_owner": ""}, r"^registry-owner: '': expected a GitHub user"),
    ],
)
def test_bad_inputs_are_named(inputs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        plan(**inputs)


def test_plan_command_appends_github_outputs(tmp_path: Path) -> None:
    output = tmp_path / "github_output"
    output.write_text("earlier=1\n")
    console = Console(file=io.StringIO(), width=300)
    inputs = NightlyInputs(flavors="cpu", benchmarks="llama2:tiny", bench_flavor="cpu", registry_owner="me")
    assert nightly_plan(inputs, output, console) == 0
    lines = output.read_text().splitlines()
    assert lines[0] == "earlier=1"
    values = dict(line.split("=", 1) for line in lines[1:])
    assert json.loads(values["flavors"]) == ["cpu"]
    assert values["registry"] == "ghcr.io/me"
    # The real recipes and manifest: the date is today's and the build matrix names real flavors.
    assert values["date"] == dt.datetime.now(dt.UTC).date().isoformat()
    assert {b["flavor"] for b in json.loads(values["build"])["include"]} == {"cpu"}


def test_a_night_can_be_named_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    """--date replays a night (local nights that build a history): it names the date output; a bad date is
    refused before anything is planned."""
    console = Console(file=io.StringIO(), width=300)
    inputs = NightlyInputs(flavors="cpu", benchmarks="llama2:tiny", bench_flavor="cpu", registry_owner="me")
    output = tmp_path / "github_output"
    assert nightly_plan(inputs, output, console, date="2026-10-13") == 0
    assert "date=2026-10-13" in output.read_text().splitlines()
    with pytest.raises(InvalidInput, match=r"--date '2026-13-01': expected YYYY-MM-DD"):
        nightly_plan(inputs, tmp_path / "other", console, date="2026-13-01")
    assert not (tmp_path / "other").exists()


BACKENDS = {
    "native": BackendPlan(None, ()),
    "maxtext": BackendPlan("maxtext", ("llama2",)),
    "levanter": BackendPlan("levanter", ("llama2",)),
}


def plan_with_backends(**inputs: object) -> dict[str, object]:
    inputs.setdefault("registry_owner", "me")
    inputs.setdefault("bench_runners", json.dumps({"h100": ["gpu"]}))
    done = plan_nightly(
        NightlyInputs(**inputs), flavors=FLAVORS, recipes=RECIPES, now=LATE, backends=BACKENDS
    )  # type: ignore[arg-type]
    return {k: json.loads(v) if v[:1] in "[{" else v for k, v in done.outputs().items()}


def test_backends_axis_runs_each_framework_in_its_image_and_skips_what_it_does_not_train() -> None:
    out = plan_with_backends(benchmarks="llama2:tiny vit:tiny")
    bench = out["bench"]["include"]  # type: ignore[index]
    # levanter's flavor is not among FLAVORS: by default only the frameworks whose image is built run.
    assert [(j["recipe"], j["backend"], j["flavor"]) for j in bench] == [
        ("llama2", "native", "jax"),
        ("vit", "native", "jax"),
        ("llama2", "maxtext", "maxtext"),
    ]
    smoke = {b["flavor"]: b["smoke-backends"] for b in out["build"]["include"]}  # type: ignore[index]
    assert smoke == {"jax": "native", "maxtext": "native maxtext", "cpu": "native"}


def test_a_benchmark_a_backend_refuses_is_left_out_and_listed() -> None:
    """The default sizes ask for settings some frameworks cannot express (cuDNN attention, a remat policy):
    planned anyway, such a job failed every night; now the plan leaves it out and says why."""

    def refused(recipe: str, size: str, backend: str) -> str | None:
        if (recipe, size, backend) == ("llama2", "7b", "maxtext"):
            return "train.attention=cudnn: not here with --backend maxtext"
        return None

    plan = plan_nightly(
        NightlyInputs(
            benchmarks="llama2:7b llama2:tiny",
            bench_runners=json.dumps({"h100": ["gpu"], "h200": ["gpu"]}),
            registry_owner="me",
        ),
        flavors=FLAVORS,
        recipes=RECIPES,
        now=LATE,
        backends=BACKENDS,  # type: ignore[arg-type]
        refused=refused,
    )
    jobs = {(j["recipe"], j["size"], j["backend"]) for j in plan.bench}
    assert ("llama2", "7b", "maxtext") not in jobs
    assert {("llama2", "7b", "native"), ("llama2", "tiny", "maxtext")} <= jobs
    # One line for the benchmark, however many hardware classes would have run it.
    assert json.loads(plan.outputs()["left-out"]) == [
        "llama2:7b on maxtext: train.attention=cudnn: not here with --backend maxtext"
    ]


def test_the_shipped_registry_refuses_what_the_frameworks_cannot_express_at_the_default_sizes() -> None:
    from jaxbench.nightly.commands import benchmark_refusal as refused

    assert refused("llama2", "1b", "native") is None and refused("llama2", "1b", "maxtext") is None
    assert (refused("llama2", "1b", "pax") or "").startswith("train.attention=cudnn: Praxis 1.4.0")
    assert (refused("gpt3", "1.3b", "levanter") or "").startswith("train.remat=dots_no_batch: Levanter")
    assert refused("llama2", "tiny", "pax") is None  # the CPU size: xla attention, no remat


def test_a_backend_whose_image_is_not_built_is_named() -> None:
    with pytest.raises(
        InvalidInput, match=r"^backends: levanter runs in the levanter image, which is not among"
    ):
        plan_with_backends(backends="native levanter")
    with pytest.raises(InvalidInput, match=r"^backends: paxml: expected some of native, maxtext, levanter"):
        plan_with_backends(backends="paxml")
    out = plan_with_backends(backends="maxtext", benchmarks="llama2:tiny")
    assert [j["backend"] for j in out["bench"]["include"]] == ["maxtext"]  # type: ignore[index]
