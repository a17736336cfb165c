"""The Pax backend: Pax's own trainer (`paxml.main`: its SingleTask, praxis' TransformerLm, its Adam and
schedules) in Pax's own environment (`.venv-pax`, Python 3.10 with jax 0.4.26, or the pax image's /opt/pax).

The recipe becomes settings (`configure`, pure) that a Pax experiment reads (pax_experiment.py, copied beside
them and run by Pax's interpreter); the data is the recipe's own token walk, in a file Pax's input reads, so
the loss has the native run's optimum. Pax logs each step's loss and steps/sec ("Setting task status" lines,
one a step at the intervals jaxbench sets); the exact parameter count comes from praxis' own counting
function (framework/launch.py prints it). Pax reports no FLOPs of its own.

    jaxbench run llama2 --backend pax
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from jaxbench.harness.backends.framework.launch import parameter_count
from jaxbench.harness.backends.framework.program import (
    FrameworkBackend,
    StepRecord,
    TrainerCommand,
    TrainerReport,
    devices_dividing_the_batch,
    language_model,
)
from jaxbench.harness.backends.native.data import TokenStream, optimal_loss, token_stream
from jaxbench.harness.config import Precision, Recipe, RematPolicy
from jaxbench.harness.families.llama2 import LlamaConfig

HERE = Path(__file__).resolve().parent
LAUNCH = HERE / "framework" / "launch.py"
EXPERIMENT = HERE / "pax_experiment.py"
TRAINER = "paxml.main"
COUNT_PARAMS = "praxis.py_utils:total_num_vars"
SETTINGS_FILE = "settings.json"
TOKENS_FILE = "tokens.npy"

# Praxis' checkpoint policies of its scanned layers (praxis.layers.AutodiffCheckpointType values).
REMAT = {
    RematPolicy.NONE: "save_everything",
    RematPolicy.FULL: "save_nothing",
    RematPolicy.DOTS: "save_dot_only",
    RematPolicy.DOTS_NO_BATCH: "save_dot_with_no_batch_dims",
}
DTYPE = {Precision.FP32: "float32", Precision.BF16: "bfloat16"}  # fp8: refused
# paxml's per-step status line: ...] Setting task status: step = 7, loss= 3.55, steps/sec 63.7, ...
_STATUS = re.compile(
    r"Setting task status: step = (?P<step>\d+), loss= (?P<loss>[-+0-9.eEnaif]+), "
    r"steps/sec (?P<rate>[-+0-9.eEnaif]+)"
)


class Pax:
    name = "pax"
    title = "Pax"
    module = "paxml"
    trainer = TRAINER
    distribution = "paxml"
    component = "paxml"
    extra_env: Mapping[str, str] = MappingProxyType({"TF_CPP_MIN_LOG_LEVEL": "2"})
    """TensorFlow (Pax's summaries, its input) is imported; its start-up chatter is noise."""

    def check(self, recipe: Recipe) -> None:
        # cuDNN attention and fp8: refused by the registry entry (harness/backends/__init__.py).
        language_model(recipe)

    def configure(self, recipe: Recipe, mesh_shape: Mapping[str, int], platform: str) -> PaxRun:
        model, train, opt = language_model(recipe), recipe.train, recipe.optimizer
        devices_dividing_the_batch(recipe, mesh_shape, "Pax", "splits the batch over every device")
        shape: dict[str, Any] = {
            "family": "llama2" if isinstance(model, LlamaConfig) else "gpt3",
            "vocab_size": model.vocab_size,
            "d_model": model.d_model,
            "num_layers": model.num_layers,
            "num_heads": model.num_heads,
            "ffn_dim": model.ffn_dim,
            "seq_len": model.seq_len,
            "norm_eps": model.norm_eps,
        }
        if isinstance(model, LlamaConfig):
            shape |= {"num_kv_heads": model.num_kv_heads, "rope_theta": model.rope_theta}
        decay_steps = opt.decay_steps or train.steps
        settings = {
            "model": shape,
            "train": {
                "global_batch": train.global_batch,
                "steps": train.steps,
                "seed": train.seed,
                "dtype": DTYPE[train.precision],
                "remat": REMAT[train.remat],
            },
            "optimizer": {
                "learning_rate": opt.learning_rate,
                "warmup_steps": min(opt.lr_warmup_steps, decay_steps - 1),
                "decay_steps": decay_steps,
                "min_lr_ratio": opt.min_lr_ratio,
                "b1": opt.b1,
                "b2": opt.b2,
                "eps": opt.eps,
                "weight_decay": opt.weight_decay,
                "grad_clip": opt.grad_clip,
            },
            # Pax's mesh axes: replica (pure data parallel), data (FSDP), mdl (tensor).
            "mesh": {
                "ici": [mesh_shape.get("data", 1), mesh_shape.get("fsdp", 1), mesh_shape.get("tensor", 1)]
            },
        }
        stream = token_stream(recipe.data, model, train.global_batch, train.seed)
        # A window of seq_len + 1 tokens per example; one batch more than the steps, for Pax's look-ahead.
        tokens = (train.steps + 1) * train.global_batch * (model.seq_len + 1)
        return PaxRun(settings, stream, tokens)

    def start(self, config: PaxRun, python: Path, artifacts: Path) -> TrainerCommand:
        np.save(artifacts / TOKENS_FILE, config.stream.host_walk(config.tokens).astype(np.int32))
        settings = {**config.settings, "data": {"tokens": str(artifacts / TOKENS_FILE)}}
        (artifacts / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n")
        # A copy beside the settings: Pax imports the experiment by module name, from this folder alone.
        shutil.copyfile(EXPERIMENT, artifacts / EXPERIMENT.name)
        argv = [
            str(python),
            str(LAUNCH),
            "--count-params",
            COUNT_PARAMS,
            "--module",
            TRAINER,
            "--",
            f"--exp={EXPERIMENT.stem}.RecipeExperiment",
            f"--job_log_dir={artifacts / 'job'}",
            "--mode=train",
            # Its initial and final checkpoints: seconds of writing that no benchmark reads.
            "--enable_checkpoint_saving=false",
        ]
        env = {"JAXBENCH_PAX_SETTINGS": str(artifacts / SETTINGS_FILE), "PYTHONPATH": str(artifacts)}
        return TrainerCommand(argv, env)

    def progress(self, line: str) -> StepRecord | None:
        match = _STATUS.search(line)
        if match is None:
            return None
        rate = float(match["rate"])
        # Pax numbers a step by the count after it (1 for the first), and times it as 1 / steps per second.
        return StepRecord(int(match["step"]) - 1, 1 / rate if rate > 0 else math.inf, float(match["loss"]))

    def read(self, config: PaxRun, artifacts: Path, log: str) -> TrainerReport:
        steps: dict[int, StepRecord] = {}
        for line in log.splitlines():
            record = self.progress(line)
            if record is not None:
                steps.setdefault(record.step, record)
        return TrainerReport([steps[step] for step in sorted(steps)], parameter_count(log))

    def optimal_loss(self, recipe: Recipe) -> float:
        return optimal_loss(recipe)  # it reads the recipe's own stream


@dataclasses.dataclass(frozen=True)
class PaxRun:
    settings: dict[str, Any]
    """What pax_experiment.py reads, less the path of this run's token file."""
    stream: TokenStream
    tokens: int
    """Length of the walk Pax reads."""


class PaxBackend(FrameworkBackend):
    def __init__(self) -> None:
        super().__init__(Pax())
