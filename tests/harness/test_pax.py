"""The Pax backend: the recipe's mapping onto the settings its experiment reads, checked against the
configuration Pax itself wrote (`job/model_params.txt`) in real runs (tests/support/data/frameworks/pax/,
written by Paxml and Praxis 1.4.0 on jax 0.4.26 on the CPU), the reader of its per-step status lines, the
files jaxbench writes for it (settings, token walk, experiment), and a real run of Pax's own trainer when its
environment is here (`make venv FLAVOR=pax`; `.ci/run` makes it).
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import numpy as np
import pytest

from jaxbench.containers.manifest import load_manifest
from jaxbench.core.errors import InvalidInput
from jaxbench.harness import recipes
from jaxbench.harness.backends import check_settings
from jaxbench.harness.backends.pax import EXPERIMENT, Pax
from tests.support.frameworks import FIXTURES as FRAMEWORK_FIXTURES
from tests.support.frameworks import require_framework, run_for_real

FIXTURES = FRAMEWORK_FIXTURES / "pax"
MESH = {"data": 1, "fsdp": 1, "tensor": 1}
LAYER = "model.lm_tpl.stacked_transformer_tpl.block.transformer_layer_params_tpl."
OPTIMIZER = "train.learner.optimizer."


def pax_configuration(family: str) -> dict[str, str]:
    """`key : value` lines of the configuration Pax resolved and trained with."""
    lines = (FIXTURES / f"{family}-tiny" / "job" / "model_params.txt").read_text().splitlines()
    return dict(line.split(" : ", 1) for line in lines if " : " in line)


@pytest.mark.parametrize("family", ["llama2", "gpt3"])
def test_pax_trained_with_every_setting_of_the_mapping(family: str) -> None:
    recipe = recipes.load(family, "tiny", steps=7)
    ours = Pax().configure(recipe, MESH, "cpu").settings
    # The settings written are the mapping as it is today (regenerate the fixtures when it changes).
    written = json.loads((FIXTURES / f"{family}-tiny" / "settings.json").read_text())
    assert {k: v for k, v in written.items() if k != "data"} == ours
    theirs = pax_configuration(family)
    model, train, opt = ours["model"], ours["train"], ours["optimizer"]
    expected = {
        "model.lm_tpl.stacked_transformer_tpl.x_times": str(model["num_layers"]),
        "model.lm_tpl.stacked_transformer_tpl.checkpoint_policy": repr(train["remat"]),
        "model.lm_tpl.stacked_transformer_tpl.block.model_dims": str(model["d_model"]),
        "model.lm_tpl.stacked_transformer_tpl.block.hidden_dims": str(model["ffn_dim"]),
        "model.lm_tpl.stacked_transformer_tpl.block.num_heads": str(model["num_heads"]),
        "model.lm_tpl.vocab_size": str(model["vocab_size"]),
        "model.lm_tpl.final_ln_tpl.epsilon": repr(model["norm_eps"]),
        LAYER + "ln_tpl.epsilon": repr(model["norm_eps"]),
        LAYER + "tr_atten_tpl.atten_logit_cap": "0.0",
        "model.lm_tpl.softmax_tpl.soft_cap_logits": "NoneType",
        "model.lm_tpl.softmax_tpl.feed_forward_tpl.has_bias": "False",
        "model.fprop_dtype": "type/jax.numpy/float32",
        "train.num_train_steps": "7",
        "train.random_seed": str(train["seed"]),
        OPTIMIZER + "cls": "type/praxis.optimizers/Adam",
        OPTIMIZER + "learning_rate": repr(opt["learning_rate"]),
        OPTIMIZER + "beta1": repr(opt["b1"]),
        OPTIMIZER + "beta2": repr(opt["b2"]),
        OPTIMIZER + "epsilon": repr(opt["eps"]),
        OPTIMIZER + "decoupled_weight_decay": repr(opt["weight_decay"]),
        OPTIMIZER + "clip_gradient_norm_to_value": repr(opt["grad_clip"]),
        OPTIMIZER + "clip_threshold": "0.0",
        OPTIMIZER + "lr_schedule.warmup_steps": str(opt["warmup_steps"]),
        OPTIMIZER + "lr_schedule.decay_end": str(opt["decay_steps"]),
        OPTIMIZER + "lr_schedule.min_ratio": repr(opt["min_lr_ratio"]),
    }
    if family == "llama2":
        expected |= {
            LAYER + "tr_atten_tpl.cls": "type/praxis.layers.grouped_query_attention/GroupedQueryAttention",
            LAYER + "tr_atten_tpl.num_kv_heads": str(model["num_kv_heads"]),
            LAYER + "tr_atten_tpl.use_bias": "False",
            LAYER + "tr_atten_tpl.rope_min_max_timescales": f"(1, {model['rope_theta']!r})",
            LAYER + "ln_tpl.cls": "type/praxis.layers.normalizations/RmsNorm",
            LAYER + "tr_fflayer_tpl.use_gated_activation": "True",
            LAYER + "tr_fflayer_tpl.activation_tpl.cls": "type/praxis.layers.activations/Swish",
            LAYER + "tr_fflayer_tpl.has_bias": "False",
            "model.lm_tpl.softmax_tpl.cls": "type/praxis.layers.embedding_softmax/FullSoftmax",
            "model.lm_tpl.separate_embedding_tpl.cls": "type/praxis.layers.embedding_softmax/Embedding",
            "model.lm_tpl.position_emb_tpl": "NoneType",
        }
    else:
        expected |= {
            LAYER + "tr_atten_tpl.use_bias": "True",
            LAYER + "tr_atten_tpl.internal_enable_per_dim_scale": "False",
            LAYER + "tr_fflayer_tpl.activation_tpl.cls": "type/praxis.layers.activations/GELU",
            LAYER + "tr_fflayer_tpl.activation_tpl.approximate": "True",
            LAYER + "tr_fflayer_tpl.has_bias": "True",
            "model.lm_tpl.softmax_tpl.cls": "type/praxis.layers.embedding_softmax/SharedEmbeddingSoftmax",
            "model.lm_tpl.position_emb_tpl.max_seq_length": str(model["seq_len"]),
        }
    assert {key: theirs.get(key) for key in expected} == expected
    command = shlex.split((FIXTURES / f"{family}-tiny" / "command.txt").read_text())
    assert command[command.index("--module") + 1] == "paxml.main"
    assert {"--exp=pax_experiment.RecipeExperiment", "--enable_checkpoint_saving=false"} <= set(command)


@pytest.mark.parametrize(("family", "params"), [("llama2", 100_672), ("gpt3", 108_288)])
def test_reading_what_pax_wrote(family: str, params: int) -> None:
    artifacts = FIXTURES / f"{family}-tiny"
    log = (artifacts / "trainer.log").read_text()
    run = Pax().configure(recipes.load(family, "tiny", steps=7), MESH, "cpu")
    report = Pax().read(run, artifacts, log)
    assert report.parameter_count == params == recipes.load(family, "tiny").model.param_count()
    assert [s.step for s in report.steps] == list(range(7))
    assert all(0 < s.seconds < math.inf and math.isfinite(s.loss) for s in report.steps)
    # The first step holds the compilation: the slowest by far.
    assert report.steps[0].seconds > 10 * max(s.seconds for s in report.steps[1:])
    assert report.steps[-1].loss < report.steps[0].loss
    progress = [p for p in map(Pax().progress, log.splitlines()) if p is not None]
    assert [(p.step, p.loss) for p in progress] == [(s.step, s.loss) for s in report.steps]


def test_a_status_line_is_one_step() -> None:
    line = (
        "I1128 22:18:28.086342 140251611784896 local.py:45] Setting task status: step = 7, "
        "loss= 3.5576443672180176, steps/sec 63.7558180187575, aux_loss=0.0"
    )
    step = Pax().progress(line)
    assert step is not None and step.step == 6 and step.loss == pytest.approx(3.5576443672180176)
    assert step.seconds == pytest.approx(1 / 63.7558180187575)
    assert Pax().progress("I1128 local.py:45] Setting task status: Train experiment x at /tmp/job") is None
    nan = Pax().progress("Setting task status: step = 3, loss= nan, steps/sec 10.0, aux_loss=0.0")
    assert nan is not None and math.isnan(nan.loss)


def test_the_token_file_is_a_walk_of_the_recipes_stream(tmp_path: Path) -> None:
    recipe = recipes.load("llama2", "tiny", steps=7)
    run = Pax().configure(recipe, MESH, "cpu")
    command = Pax().start(run, Path("/venv/bin/python"), tmp_path)
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert settings["data"] == {"tokens": str(tmp_path / "tokens.npy")}
    assert command.env == {
        "JAXBENCH_PAX_SETTINGS": str(tmp_path / "settings.json"),
        "PYTHONPATH": str(tmp_path),
    }
    assert (tmp_path / EXPERIMENT.name).read_text() == EXPERIMENT.read_text()
    assert f"--job_log_dir={tmp_path / 'job'}" in command.argv
    tokens = np.load(tmp_path / "tokens.npy")
    assert tokens.dtype == np.int32 and len(tokens) == 8 * 8 * 65  # a batch more than the steps
    stream = run.stream
    steps = set(((tokens[1:] - tokens[:-1]) % stream.vocab_size).tolist())
    assert steps <= set(stream.offsets.tolist()) and len(steps) > 1
    assert Pax().optimal_loss(recipe) == pytest.approx(stream.optimal_loss)


def test_mesh_precision_and_remat() -> None:
    recipe = recipes.load("llama2", "1b", ["train.attention=xla", "train.remat=dots_no_batch"])
    settings = Pax().configure(recipe, {"data": 2, "fsdp": 4, "tensor": 1}, "gpu").settings
    assert settings["mesh"] == {"ici": [2, 4, 1]}
    assert settings["train"]["dtype"] == "bfloat16"
    assert settings["train"]["remat"] == "save_dot_with_no_batch_dims"
    assert settings["model"]["num_kv_heads"] == recipe.model.num_kv_heads  # type: ignore[union-attr]


def test_settings_pax_cannot_express_are_named() -> None:
    with pytest.raises(InvalidInput, match=r"^train.attention=cudnn: Praxis 1.4.0 has no cuDNN attention"):
        check_settings("pax", recipes.load("llama2", "1b"))
    with pytest.raises(InvalidInput, match=r"^train.precision=fp8: Pax 1.4.0 has no current-scaling fp8"):
        check_settings("pax", recipes.load("llama2", "tiny", ["train.precision=fp8"]))
    check_settings("pax", recipes.load("llama2", "1b", ["train.attention=xla", "train.remat=dots"]))
    with pytest.raises(InvalidInput, match=r"^train.global_batch=8: Pax splits the batch over every device"):
        Pax().configure(recipes.load("llama2", "tiny"), {"data": 3, "fsdp": 1, "tensor": 1}, "cpu")


@pytest.mark.frameworks
@pytest.mark.parametrize("family", ["llama2", "gpt3"])
def test_paxs_own_trainer_trains_the_tiny_shape(family: str, tmp_path: Path) -> None:
    require_framework("pax")
    result = run_for_real("pax", family, tmp_path)
    assert result.provenance.versions.jax == "0.4.26"  # Pax's own jax, not the harness's
    framework = result.provenance.framework
    assert framework is not None and framework.version == "1.4.0"
    # Its commit: paxml's release, as .venv-pax recorded it from the manifest (the component is paxml).
    release = load_manifest().components["paxml"].release
    assert framework.commit is not None and framework.commit == getattr(release, "commit", None)
    assert result.loss is not None and result.loss.optimal == pytest.approx(1.8158, abs=1e-3)
