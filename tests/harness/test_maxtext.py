"""The MaxText backend: the recipe's mapping onto MaxText's configuration, checked against the configuration
MaxText itself printed in a real run (tests/support/data/frameworks/maxtext/, written by MaxText 0.2.4 on the
CPU), the readers of its metrics file and log, and a real run of MaxText's own trainer when its environment is
here (`make venv FLAVOR=maxtext`; `.ci/run` makes it and sets JAXBENCH_REQUIRE_FRAMEWORKS=1).
"""

from __future__ import annotations

import ast
import json
import math
import re
import shlex
from pathlib import Path

import pytest

from jaxbench.core.errors import InvalidInput
from jaxbench.harness import recipes
from jaxbench.harness.backends import check_settings
from jaxbench.harness.backends.framework.launch import parameter_count
from jaxbench.harness.backends.maxtext import MaxText, compile_seconds
from tests.support.frameworks import FIXTURES as FRAMEWORK_FIXTURES
from tests.support.frameworks import require_framework, run_for_real

FIXTURES = FRAMEWORK_FIXTURES / "maxtext"
MESH = {"data": 1, "fsdp": 1, "tensor": 1}


def printed_config(log: str) -> dict[str, str]:
    """`Config param KEY: VALUE` lines: the configuration MaxText resolved and ran with."""
    return dict(re.findall(r"Config param (\w+): (.*)$", log, flags=re.MULTILINE))


def same_setting(ours: str, theirs: str) -> bool:
    theirs = theirs.rpartition(".")[2] if re.fullmatch(r"[A-Z]\w*Type\.\w+", theirs) else theirs  # enums
    if ours.lower() == theirs.lower() or (ours == "none" and theirs == "None"):
        return True
    try:
        return math.isclose(float(ours), float(theirs), rel_tol=1e-9)
    except ValueError:
        pass
    try:
        return bool(json.loads(ours) == ast.literal_eval(theirs))
    except (ValueError, SyntaxError):
        return False


@pytest.mark.parametrize("family", ["llama2", "gpt3"])
def test_maxtext_ran_with_every_setting_of_the_mapping(family: str) -> None:
    recipe = recipes.load(family, "tiny", steps=7)
    ours = MaxText().configure(recipe, MESH, "cpu")
    theirs = printed_config((FIXTURES / f"{family}-tiny" / "trainer.log").read_text())
    differing = {
        k: (v, theirs.get(k)) for k, v in ours.items() if not same_setting(v, theirs.get(k, "<absent>"))
    }
    assert differing == {}
    # The fixture's command line is the mapping as it is today (regenerate the fixtures when it changes).
    command = shlex.split((FIXTURES / f"{family}-tiny" / "command.txt").read_text())
    assert [
        a
        for a in command
        if "=" in a and not a.startswith(("base_output_directory", "metrics_file", "jax_cache_dir"))
    ] == [f"{k}={v}" for k, v in ours.items()]


def test_llama2_maps_shape_optimizer_and_mesh() -> None:
    recipe = recipes.load("llama2", "tiny", ["train.global_batch=16"])
    config = MaxText().configure(recipe, {"data": 2, "fsdp": 1, "tensor": 1}, "gpu")
    assert config["decoder_block"] == "llama2" and config["base_num_kv_heads"] == "2"
    assert config["head_dim"] == "16" and config["base_mlp_dim"] == "176"
    assert config["logits_via_embedding"] == "false" and config["rope_max_timescale"] == "10000.0"
    assert config["per_device_batch_size"] == "8" and config["ici_data_parallelism"] == "2"
    assert config["hardware"] == "gpu" and config["attention"] == "dot_product"
    assert config["adam_b2"] == "0.95" and config["learning_rate"] == "0.01"
    # int(41 x fraction) = 10 warmup steps, as the recipe's lr_warmup_steps, over a schedule one step longer
    assert config["learning_rate_schedule_steps"] == "41"
    assert int(41 * float(config["warmup_steps_fraction"])) == 10


def test_bf16_fp8_and_cudnn_attention() -> None:
    recipe = recipes.load("llama2", "1b", ["train.precision=fp8"])
    config = MaxText().configure(recipe, {"data": 1, "fsdp": 8, "tensor": 1}, "gpu")
    assert (config["dtype"], config["weight_dtype"], config["quantization"]) == (
        "bfloat16",
        "float32",
        "fp8_gpu",
    )
    assert config["attention"] == "cudnn_flash_te" and config["remat_policy"] == "minimal"
    assert config["per_device_batch_size"] == "1" and config["ici_fsdp_parallelism"] == "8"


def test_settings_maxtext_cannot_express_are_named_before_anything_starts() -> None:
    with pytest.raises(InvalidInput, match=r"^train.remat=dots: MaxText has no policy"):
        check_settings("maxtext", recipes.load("llama2", "tiny", ["train.remat=dots"]))
    with pytest.raises(InvalidInput, match=r"train.global_batch=9: MaxText takes a whole batch per device"):
        MaxText().configure(recipes.load("llama2", "tiny", ["train.global_batch=9"]), {"data": 2}, "cpu")


@pytest.mark.parametrize(("family", "params"), [("llama2", 100_672), ("gpt3", 108_288)])
def test_reading_what_maxtext_wrote(family: str, params: int) -> None:
    artifacts = FIXTURES / f"{family}-tiny"  # as MaxText wrote it: its log, metrics file, command line
    log = (artifacts / "trainer.log").read_text()
    report = MaxText().read({}, artifacts, log)
    assert report.parameter_count == params == recipes.load(family, "tiny").model.param_count()
    assert [s.step for s in report.steps] == list(range(7))
    assert all(s.seconds > 0 and math.isfinite(s.loss) for s in report.steps)
    assert report.steps[-1].tflops_per_device is not None and report.steps[-1].tflops_per_device > 0
    assert report.compile_s is not None and 0 < report.compile_s < 120
    # The progress bar reads the same steps from the log lines as they come.
    progress = [p for p in map(MaxText().progress, log.splitlines()) if p is not None]
    assert [p.step for p in progress] == [s.step for s in report.steps]
    assert [round(p.loss, 3) for p in progress] == [round(s.loss, 3) for s in report.steps]


def test_a_metrics_file_that_is_not_maxtexts_is_named(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "loss": 1}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:1: expected MaxText's per-step metrics"):
        MaxText().read({}, tmp_path, "")
    assert parameter_count("no count here") is None and compile_seconds("") is None


@pytest.mark.frameworks
@pytest.mark.parametrize("family", ["llama2", "gpt3"])
def test_maxtexts_own_trainer_trains_the_tiny_shape(family: str, tmp_path: Path) -> None:
    require_framework("maxtext")
    result = run_for_real("maxtext", family, tmp_path)
    assert result.provenance.framework is not None and result.provenance.framework.version == "0.2.4"
    log = tmp_path / (result.framework.artifacts if result.framework else "") / "trainer.log"
    assert "completed step: 7" in log.read_text()
