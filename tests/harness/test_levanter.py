"""The Levanter backend: the recipe's mapping onto train_lm's configuration, checked against the configuration
Levanter itself reported (its json_logger `hparams` record) in real runs
(tests/support/data/frameworks/levanter/, written by Levanter 1.2.dev1644 on jax 0.7.2 on the CPU), the reader
of its tracker records, the files jaxbench writes for it (document, tokenizer, config), and a real run of
Levanter's own trainer when its environment is here (`make venv FLAVOR=levanter`; `.ci/run` makes it).
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from jaxbench.core.errors import InvalidInput
from jaxbench.harness import recipes
from jaxbench.harness.backends import check_settings
from jaxbench.harness.backends.levanter import Levanter, tracker_record
from tests.support.frameworks import FIXTURES as FRAMEWORK_FIXTURES
from tests.support.frameworks import require_framework, run_for_real

FIXTURES = FRAMEWORK_FIXTURES / "levanter"
MESH = {"data": 1, "fsdp": 1, "tensor": 1}


def reported_hparams(log: str) -> dict[str, Any]:
    for line in log.splitlines():
        record = tracker_record(line)
        if record is not None and record.get("event") == "hparams":
            hparams: dict[str, Any] = record["hparams"]
            return hparams
    raise AssertionError("no hparams record in the log")


@pytest.mark.parametrize("family", ["llama2", "gpt3"])
def test_levanter_ran_with_every_setting_of_the_mapping(family: str) -> None:
    recipe = recipes.load(family, "tiny", steps=7)
    ours = Levanter().configure(recipe, MESH, "cpu").settings
    theirs = reported_hparams((FIXTURES / f"{family}-tiny" / "trainer.log").read_text())
    for section in ("model", "optimizer"):
        for key, value in ours[section].items():
            if key in ("type", "rope", "attn_backend"):
                continue  # the choice's name, a nested choice, an enum: checked below
            assert theirs[section][key] == value, (section, key)
    for key in ("seed", "train_batch_size", "num_train_steps", "replica_ici_axis_size", "model_axis_size"):
        assert theirs["trainer"][key] == ours["trainer"][key], key
    assert "float32" in theirs["trainer"]["mp"]["compute_dtype"]
    # Weight decay on matrices and embeddings only, as native: Levanter logs which weights it decays.
    decayed = next(
        r["hparams"]["decayed_weights"]
        for r in map(tracker_record, (FIXTURES / f"{family}-tiny" / "trainer.log").read_text().splitlines())
        if r is not None and "decayed_weights" in r.get("hparams", {})
    )
    assert decayed and not [w for w in decayed if "norm" in w.lower() or "ln_" in w or w.endswith("bias")]
    assert theirs["model"]["attn_backend"].endswith("VANILLA")
    if family == "llama2":
        assert theirs["model"]["rope"]["theta"] == 10000.0 and theirs["model"]["tie_word_embeddings"] is False
    else:
        assert theirs["model"]["mlp_scale"] == 4 and theirs["model"]["use_bias"] is True
    # The written configuration is the mapping as it is today (regenerate the fixtures when it changes).
    written = yaml.safe_load((FIXTURES / f"{family}-tiny" / "config.yaml").read_text())
    assert {k: written[k] for k in ("optimizer", "data_seed")} == {
        "optimizer": ours["optimizer"],
        "data_seed": ours["data_seed"],
    }
    command = shlex.split((FIXTURES / f"{family}-tiny" / "command.txt").read_text())
    assert command[1:4] == ["-m", "levanter.main.train_lm", "--config_path"]


@pytest.mark.parametrize(("family", "params"), [("llama2", 100_672), ("gpt3", 108_288)])
def test_reading_what_levanter_wrote(family: str, params: int) -> None:
    artifacts = FIXTURES / f"{family}-tiny"
    log = (artifacts / "trainer.log").read_text()
    run = Levanter().configure(recipes.load(family, "tiny", steps=7), MESH, "cpu")
    report = Levanter().read(run, artifacts, log)
    assert report.parameter_count == params == recipes.load(family, "tiny").model.param_count()
    assert [s.step for s in report.steps] == list(range(7))  # the last step, logged twice, counts once
    assert all(s.seconds > 0 and math.isfinite(s.loss) for s in report.steps)
    assert all(s.tflops_per_device is not None and s.tflops_per_device > 0 for s in report.steps[2:])
    progress = [p for p in map(Levanter().progress, log.splitlines()) if p is not None]
    assert [(p.step, p.loss) for p in progress][:7] == [(s.step, s.loss) for s in report.steps]


def test_the_document_is_a_walk_of_the_recipes_stream(tmp_path: Path) -> None:
    recipe = recipes.load("llama2", "tiny", steps=7)
    run = Levanter().configure(recipe, MESH, "cpu")
    command = Levanter().start(run, Path("/venv/bin/python"), tmp_path)
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert command.argv[-1] == str(tmp_path / "config.yaml")
    assert config["data"]["train_urls"] == [(tmp_path / "data.jsonl").as_uri()]
    assert config["model"]["tokenizer"] == config["data"]["tokenizer"] == str(tmp_path / "tokenizer")
    tokens = np.array(json.loads((tmp_path / "data.jsonl").read_text())["text"].split(), dtype=np.int64)
    assert len(tokens) == (7 * 8 + 1) * 64
    stream = run.stream
    steps = set(((tokens[1:] - tokens[:-1]) % stream.vocab_size).tolist())
    assert steps <= set(stream.offsets.tolist()) and len(steps) > 1
    vocab = json.loads((tmp_path / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    assert vocab == {str(i): i for i in range(64)}
    assert Levanter().optimal_loss(recipe) == pytest.approx(stream.optimal_loss)


def test_gpt2_finds_its_reference_in_a_private_hub_cache(tmp_path: Path) -> None:
    run = Levanter().configure(recipes.load("gpt3", "tiny"), MESH, "cpu")
    command = Levanter().start(run, Path("python"), tmp_path)
    snapshot = Path(command.env["HF_HUB_CACHE"]) / "models--gpt2" / "snapshots" / "jaxbench"
    assert json.loads((snapshot / "config.json").read_text()) == {"model_type": "gpt2"}
    assert (snapshot / "tokenizer.json").read_text() == (
        tmp_path / "tokenizer" / "tokenizer.json"
    ).read_text()


def test_mesh_precision_and_attention() -> None:
    recipe = recipes.load("llama2", "1b", ["train.remat=full"])
    settings = Levanter().configure(recipe, {"data": 2, "fsdp": 2, "tensor": 2}, "gpu").settings
    trainer = settings["trainer"]
    assert (trainer["replica_ici_axis_size"], trainer["model_axis_size"]) == (2, 2)
    assert trainer["tensor_parallel_axes"] == ["mlp", "heads"]
    assert trainer["mp"] == "p=f32,c=bfloat16" and trainer["require_accelerator"] is True
    assert settings["model"]["attn_backend"] == "NVTE" and settings["model"]["gradient_checkpointing"] is True


def test_settings_levanter_cannot_express_are_named() -> None:
    with pytest.raises(InvalidInput, match=r"^train.remat=dots_no_batch: Levanter checkpoints a layer whole"):
        check_settings("levanter", recipes.load("llama2", "1b"))
    with pytest.raises(InvalidInput, match=r"^train.precision=fp8: Levanter's fp8"):
        check_settings("levanter", recipes.load("llama2", "tiny", ["train.precision=fp8"]))
    with pytest.raises(
        InvalidInput, match=r"^model.ffn_dim=200: Levanter's GPT-2 block takes a whole multiple"
    ):
        Levanter().check(recipes.load("gpt3", "tiny", ["model.ffn_dim=200"]))


@pytest.mark.frameworks
@pytest.mark.parametrize("family", ["llama2", "gpt3"])
def test_levanters_own_trainer_trains_the_tiny_shape(family: str, tmp_path: Path) -> None:
    require_framework("levanter")
    result = run_for_real("levanter", family, tmp_path)
    assert result.provenance.versions.jax == "0.7.2"  # Levanter's own jax, not the harness's
    assert result.loss is not None and result.loss.optimal == pytest.approx(1.8158, abs=1e-3)
