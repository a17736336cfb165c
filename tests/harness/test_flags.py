"""XLA flag profiles: resolution and layering, checking against the real installed jaxlib (a CPU jaxlib
knows the GPU flags), renames, the fail-fast run, --drop-unknown-flags, and flags in the series identity."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from jaxbench.core.errors import InvalidInput
from jaxbench.harness import flags as harness_flags
from jaxbench.harness import recipes
from jaxbench.harness.config import FlagOverrides, Precision
from jaxbench.harness.flags import check as flagcheck
from jaxbench.harness.flags import environment
from jaxbench.harness.flags import profiles as flags
from jaxbench.harness.flags.check import ProbeResult
from tests.conftest import REPO


def test_every_shipped_profile_resolves_and_jaxlib_knows_all_its_flags() -> None:
    names = flags.available_profiles()
    assert {"base", "ampere", "hopper", "blackwell", "cpu", "none"} <= set(names)
    union: dict[str, str] = {}
    for name in names:
        for precision in (None, *Precision):
            profile = flags.resolve_profile(name, precision=precision)
            for flag, setting in profile.xla.items():
                assert setting.reason and setting.source, f"{name}: {flag} needs a reason and a source"
                union[f"{flag}"] = setting.value
    assert flags.resolve_profile("none").xla == {} and flags.resolve_profile("none").env == {}
    # One real probe for the flags of every profile (values differ per profile only by overrides_base).
    assert flagcheck.probe(union) == ProbeResult([], None)


def test_renames_are_rejected_and_their_replacements_accepted() -> None:
    renames = flags.load_renames()
    assert len(renames) >= 5
    result = flagcheck.probe({name: "true" for name in renames})
    assert sorted(result.unknown) == sorted(renames)
    replacements = {r.replacement for r in renames.values() if r.replacement}
    assert replacements and all(r.source.startswith("https://") for r in renames.values())
    probe_names = {name: "" for name in replacements}  # the empty value parses for list and string flags
    unknown = flagcheck.probe(probe_names).unknown
    assert unknown == [], unknown


@pytest.mark.slow
def test_cpu_jaxlib_knows_gpu_flags_and_rejects_unknown_ones() -> None:
    known = flagcheck.probe({"xla_gpu_enable_latency_hiding_scheduler": "true"})
    assert known == ProbeResult([], None)
    unknown = flagcheck.probe({"xla_gpu_enable_latency_hiding_scheduler": "true", "xla_made_up_flag": "1"})
    assert unknown.unknown == ["xla_made_up_flag"]
    bad_value = flagcheck.probe({"xla_gpu_all_reduce_combine_threshold_bytes": "lots"})
    assert bad_value.unknown == [] and bad_value.failure is not None


@pytest.mark.parametrize(
    ("kind", "platform", "profile"),
    [
        ("NVIDIA A100-SXM4-80GB", "gpu", "ampere"),
        ("NVIDIA H100 80GB HBM3", "gpu", "hopper"),
        ("NVIDIA H200", "gpu", "hopper"),
        ("NVIDIA B200", "gpu", "blackwell"),
        ("NVIDIA GeForce RTX 4090", "gpu", "base"),
        ("cpu", "cpu", "cpu"),
    ],
)
def test_auto_picks_by_generation(kind: str, platform: str, profile: str) -> None:
    assert flags.auto_profile(platform, kind) == profile


def write_profiles(folder: Path, **profiles: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in profiles.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(body))
    return folder


def entry(value: object, **extra: object) -> dict[str, object]:
    return {"value": value, "reason": "test", "source": "https://example.org", **extra}


def test_generation_overrides_base_only_when_marked(tmp_path: Path) -> None:
    base = {"description": "b", "xla_flags": {"xla_a": entry(1), "xla_b": entry(True)}}
    marked = {"description": "g", "extends": "base", "xla_flags": {"xla_a": entry(2, overrides_base=True)}}
    unmarked = {"description": "g", "extends": "base", "xla_flags": {"xla_a": entry(3)}}
    folder = write_profiles(tmp_path, base=base, gen=marked, bad=unmarked)
    resolved = flags.resolve_profile("gen", folder)
    assert resolved.xla_flags() == "--xla_a=2 --xla_b=true"
    assert resolved.xla["xla_a"].origin == "profile gen" and resolved.xla["xla_b"].origin == "profile base"
    with pytest.raises(
        InvalidInput, match="xla_a is already set by profile base; mark the entry `overrides_base"
    ):
        flags.resolve_profile("bad", folder)


def test_bad_profile_files(tmp_path: Path) -> None:
    folder = write_profiles(
        tmp_path,
        loop={"description": "l", "extends": "loop"},
        typo={"description": "t", "xla_flags": {"xla_a": {"value": 1, "reason": "r"}}},
    )
    with pytest.raises(InvalidInput, match="extends` loops back"):
        flags.resolve_profile("loop", folder)
    with pytest.raises(InvalidInput, match=r"typo.yaml: xla_flags.xla_a.source: Field required"):
        flags.resolve_profile("typo", folder)
    with pytest.raises(InvalidInput, match=r"no XLA flag profile 'hoper'.*expected one of"):
        flags.resolve_profile("hoper", folder)


def test_layers_recipe_then_yours() -> None:
    flag_set = flags.effective(
        "hopper",
        platform="gpu",
        device_kind="NVIDIA H100 80GB HBM3",
        recipe_xla={"xla_gpu_all_reduce_combine_threshold_bytes": 1234},
        recipe_env={},
        user_xla_flags="--xla_gpu_enable_latency_hiding_scheduler=false --xla_dump_to=/tmp/d",
        user_env={"CUDA_DEVICE_MAX_CONNECTIONS": "8"},
    )
    assert flag_set.xla["xla_gpu_all_reduce_combine_threshold_bytes"].value == "1234"
    assert flag_set.xla["xla_gpu_all_reduce_combine_threshold_bytes"].origin == "recipe"
    assert flag_set.xla["xla_gpu_enable_latency_hiding_scheduler"].value == "false"
    assert flag_set.xla["xla_dump_to"].origin == "your XLA_FLAGS"
    assert flag_set.env["CUDA_DEVICE_MAX_CONNECTIONS"].origin == "your environment"
    assert flag_set.xla_flags().split() == sorted(flag_set.xla_flags().split())


def test_shipped_llama2_7b_overrides_take_precedence_over_the_profile() -> None:
    recipe = recipes.load("llama2", "7b")
    flag_set = flags.effective(
        recipe.xla_flags,
        platform="gpu",
        device_kind="NVIDIA H100 80GB HBM3",
        recipe_xla=recipe.flag_overrides.xla,
        recipe_env=recipe.flag_overrides.env,
        user_xla_flags="",
        user_env={},
    )
    assert flag_set.profile == "hopper"
    gather = flag_set.xla["xla_gpu_all_gather_combine_threshold_bytes"]
    assert (gather.value, gather.origin) == ("134217728", "recipe")
    # Flags the recipe does not touch keep the profile's values.
    assert flag_set.xla["xla_gpu_pipeline_all_gather"].origin == "profile base"
    assert not recipes.load("llama2", "13b").flag_overrides.xla


def test_conflicting_and_malformed_flag_strings() -> None:
    with pytest.raises(InvalidInput, match=r"your XLA_FLAGS: --xla_a is given twice, as '1' and '2'"):
        flags.parse_flag_string("--xla_a=1 --xla_a=2", "your XLA_FLAGS")
    with pytest.raises(InvalidInput, match="'xla_b=1' is not a flag"):
        flags.parse_flag_string("--xla_a=1 xla_b=1", "your XLA_FLAGS")
    assert flags.parse_flag_string("--xla_a=1 --xla_a=1", "x")["xla_a"].value == "1"


def test_identity_and_diff() -> None:
    hopper, ampere = flags.resolve_profile("hopper"), flags.resolve_profile("ampere")
    assert hopper.identity_hash() == flags.resolve_profile("hopper").identity_hash()
    assert hopper.identity_hash() != ampere.identity_hash()
    assert ("CUDA_DEVICE_MAX_CONNECTIONS", None, "1") in flags.diff(ampere, hopper)
    assert flags.diff(hopper, hopper) == []


def test_unknown_flags_are_cached_per_jaxlib(tmp_path: Path) -> None:
    calls: list[Mapping[str, str]] = []

    def fake_probe(pending: Mapping[str, str]) -> ProbeResult:
        calls.append(dict(pending))
        return ProbeResult([n for n in pending if n.startswith("old_")], None)

    cache = tmp_path / "jaxlib-9.9.json"
    asked = {"good": "1", "old_flag": "2"}
    assert flagcheck.unknown_flags(asked, version="9.9", cache_file=cache, run_probe=fake_probe) == [
        "old_flag"
    ]
    assert flagcheck.unknown_flags(asked, version="9.9", cache_file=cache, run_probe=fake_probe) == [
        "old_flag"
    ]
    assert len(calls) == 1  # the second answer came from the cache
    flagcheck.unknown_flags({"good": "3"}, version="9.9", cache_file=cache, run_probe=fake_probe)
    assert calls[-1] == {"good": "3"}  # a new value is checked again


def test_a_rejected_value_is_an_error_not_a_drop(tmp_path: Path) -> None:
    def failing(pending: Mapping[str, str]) -> ProbeResult:
        return ProbeResult([], "F1122 ... Illegal value for flag")

    with pytest.raises(InvalidInput, match="jaxlib 9.9 rejects the XLA flags"):
        flagcheck.unknown_flags({"a": "x"}, version="9.9", cache_file=tmp_path / "c.json", run_probe=failing)


def test_renamed_flag_message_names_flag_version_and_replacement() -> None:
    renames = flags.load_renames()
    message = flagcheck.describe(
        "xla_gpu_graph_level", "0.12.0.1", renames, {"xla_gpu_graph_level": "your XLA_FLAGS"}
    )
    assert message.startswith(
        "--xla_gpu_graph_level (from your XLA_FLAGS) is not known to jaxlib 0.12.0.1: use --"
    )


def test_device_hint_without_starting_jax() -> None:
    gpus = "NVIDIA H100 80GB HBM3\nNVIDIA H100 80GB HBM3\n"
    assert environment.device_hint({}, run=lambda argv: gpus) == environment.DeviceHint(
        "gpu", "NVIDIA H100 80GB HBM3"
    )
    assert environment.device_hint({}, run=lambda argv: None) == environment.DeviceHint("cpu", "cpu")
    assert environment.device_hint({"JAX_PLATFORMS": "cpu"}, run=lambda argv: gpus).platform == "cpu"


def test_run_flags_drop_unknown() -> None:
    hint = environment.DeviceHint("cpu", "cpu")
    user = {
        "XLA_FLAGS": (
            "--xla_gpu_enable_triton_softmax_fusion=true --xla_gpu_enable_latency_hiding_scheduler=true"
        )
    }
    kept = harness_flags.for_run("auto", FlagOverrides(), hint, user, drop_unknown=True)
    assert kept.dropped == ("xla_gpu_enable_triton_softmax_fusion",)
    assert kept.xla_flags() == "--xla_gpu_enable_latency_hiding_scheduler=true"
    with pytest.raises(
        InvalidInput, match="--xla_gpu_enable_triton_softmax_fusion .from your XLA_FLAGS. is not known"
    ):
        harness_flags.for_run("auto", FlagOverrides(), hint, user, drop_unknown=False)


def jaxbench(*args: str, xla_flags: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**__import__("os").environ, "XLA_FLAGS": xla_flags}
    return subprocess.run(
        [sys.executable, "-m", "jaxbench", *args, "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_removed_flag_stops_the_run_in_seconds(tmp_path: Path) -> None:
    start = time.monotonic()
    done = jaxbench("run", "llama2", xla_flags="--xla_gpu_graph_level=2", out=tmp_path)
    elapsed = time.monotonic() - start
    assert done.returncode == 1
    assert "--xla_gpu_graph_level (from your XLA_FLAGS) is not known to jaxlib" in done.stderr
    assert "use --xla_gpu_enable_command_buffer" in done.stderr
    assert elapsed < 20 and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_drop_unknown_flags_runs_and_records_them(tmp_path: Path) -> None:
    xla_flags = "--xla_force_host_platform_device_count=2 --xla_gpu_graph_level=2"
    done = jaxbench("run", "gpt3", "--steps", "6", "--drop-unknown-flags", xla_flags=xla_flags, out=tmp_path)
    assert done.returncode == 0, done.stderr
    [path] = tmp_path.glob("*.json")
    result = json.loads(path.read_text())
    assert result["flags"]["dropped"] == ["xla_gpu_graph_level"]
    assert result["flags"]["profile"] == "cpu"
    assert result["flags"]["xla_flags"] == "--xla_force_host_platform_device_count=2"
    assert result["provenance"]["env"]["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert result["parallelism"]["device_count"] == 2  # the flags the run used were really in effect


def test_a_precision_layer_applies_to_runs_at_that_precision_only_and_yours_still_wins() -> None:
    def resolved(precision: str, user_xla_flags: str = "") -> flags.FlagSet:
        return flags.effective(
            "hopper",
            platform="gpu",
            device_kind="NVIDIA H200",
            recipe_xla={},
            recipe_env={},
            user_xla_flags=user_xla_flags,
            user_env={},
            precision=precision,
        )

    fp8, bf16 = resolved("fp8"), resolved("bf16")
    triton = fp8.xla["xla_gpu_enable_triton_gemm"]
    assert (triton.value, triton.origin) == ("false", "profile base, precision fp8")
    assert "xla_gpu_enable_triton_gemm" not in bf16.xla
    assert fp8.identity_hash() != bf16.identity_hash()
    assert {k: v for k, v in fp8.xla.items() if k != "xla_gpu_enable_triton_gemm"} == bf16.xla
    yours = resolved("fp8", "--xla_gpu_enable_triton_gemm=true").xla["xla_gpu_enable_triton_gemm"]
    assert (yours.value, yours.origin) == ("true", "your XLA_FLAGS")
    # The CPU profile has no precision section: an fp8 run on a CPU gets no GPU flag.
    cpu = flags.effective(
        "auto", platform="cpu", device_kind="cpu", recipe_xla={}, recipe_env={}, user_xla_flags="",
        user_env={}, precision="fp8",
    )  # fmt: skip
    assert cpu.xla == {}


def test_a_precision_section_names_its_file_when_it_is_malformed(tmp_path: Path) -> None:
    entry = {"value": False, "reason": "r", "source": "https://example.org"}
    (tmp_path / "odd.yaml").write_text(
        yaml.safe_dump({"description": "d", "precision": {"fp4": {"xla_flags": {"xla_a": entry}}}})
    )
    with pytest.raises(InvalidInput, match=r"odd.yaml: precision.fp4.*(fp32|bf16|fp8)"):
        flags.resolve_profile("odd", tmp_path, precision="fp8")
    (tmp_path / "twice.yaml").write_text(
        yaml.safe_dump(
            {"description": "d", "extends": "odd2", "precision": {"fp8": {"xla_flags": {"xla_a": entry}}}}
        )
    )
    (tmp_path / "odd2.yaml").write_text(
        yaml.safe_dump({"description": "d", "precision": {"fp8": {"xla_flags": {"xla_a": entry}}}})
    )
    with pytest.raises(
        InvalidInput, match=r"twice.yaml: xla_a is already set by profile odd2, precision fp8"
    ):
        flags.resolve_profile("twice", tmp_path, precision="fp8")
    assert flags.resolve_profile("twice", tmp_path, precision="bf16").xla == {}
