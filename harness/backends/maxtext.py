"""The MaxText backend: MaxText's own pre-training trainer (`maxtext.trainers.pre_train.train`) on MaxText's
synthetic data, in MaxText's own environment (`.venv-maxtext` or the maxtext image).

The recipe maps onto MaxText's configuration keys (`configure`, pure; a setting MaxText cannot express is an
error before anything starts); MaxText writes one JSON line per step to its metrics file, which gives the
step times (MaxText's own: the wall time between its steps), the losses and its own TFLOP/s; the exact
parameter count comes from MaxText's own counting function (framework/launch.py prints it).

    jaxbench run llama2 --backend maxtext
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from jaxbench.harness.backends.framework.launch import parameter_count
from jaxbench.harness.backends.framework.program import (
    FrameworkBackend,
    StepRecord,
    TrainerCommand,
    TrainerReport,
    devices_dividing_the_batch,
    language_model,
)
from jaxbench.harness.config import AttentionImpl, Precision, Recipe, RematPolicy
from jaxbench.harness.families.llama2 import LlamaConfig

LAUNCH = Path(__file__).resolve().parent / "framework" / "launch.py"
TRAINER = "maxtext.trainers.pre_train.train"
COUNT_PARAMS = "maxtext.utils.max_utils:calculate_num_params_from_pytree"
METRICS_FILE = "metrics.jsonl"

ATTENTION = {AttentionImpl.XLA: "dot_product", AttentionImpl.CUDNN: "cudnn_flash_te"}
REMAT = {
    RematPolicy.NONE: "none",
    RematPolicy.FULL: "full",
    # MaxText's `minimal` saves every projection's output (query/key/value/out, MLP in and out) and
    # recomputes attention's batched contractions: what dots_no_batch saves.
    RematPolicy.DOTS_NO_BATCH: "minimal",
}
PRECISION = {
    Precision.FP32: {"dtype": "float32", "weight_dtype": "float32"},
    Precision.BF16: {"dtype": "bfloat16", "weight_dtype": "float32"},
    # Current-scaling FP8 matmuls with bf16 elsewhere, as the recipe's fp8 means: MaxText's `fp8_gpu`, which
    # only its Qwix path takes (without it MaxText refuses the value).
    Precision.FP8: {
        "dtype": "bfloat16",
        "weight_dtype": "float32",
        "quantization": "fp8_gpu",
        "use_qwix_quantization": "true",
    },
}
# Parameters our recipes keep out of weight decay (norms, biases), by MaxText's parameter paths.
NO_DECAY = [".*norm.*", ".*bias.*"]

# glog's prefix on MaxText's log lines: I1124 20:35:16.152142 <thread> file.py:820] message
_GLOG_TIME = re.compile(r"^[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+) ")
# MaxText compiles its train step before step 0 (for its memory estimate): from the checkpoint decision, the
# state is initialised and the step lowered and compiled until the estimate is logged.
_COMPILE_START = re.compile(r"checkpoints found|[Rr]estoring")
_COMPILE_END = "Total estimated memory size"
_STEP_LINE = re.compile(
    r"completed step: (?P<step>\d+), seconds: (?P<seconds>[0-9.]+),.*?(?<!_)loss: (?P<loss>[-+0-9.eEnaif]+)"
)


def _number(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(value)


class MaxText:
    name = "maxtext"
    title = "MaxText"
    module = "maxtext"
    trainer = TRAINER
    distribution = "maxtext"
    component = "maxtext"
    extra_env: Mapping[str, str] = MappingProxyType({"DECOUPLE_GCLOUD": "TRUE"})
    """MaxText's switch for running without Google Cloud (no GCS, no cloud monitoring)."""

    def check(self, recipe: Recipe) -> None:
        pass  # remat=dots: refused by the registry entry (harness/backends/__init__.py)

    def configure(self, recipe: Recipe, mesh_shape: Mapping[str, int], platform: str) -> dict[str, str]:
        model, train, opt = language_model(recipe), recipe.train, recipe.optimizer
        devices = devices_dividing_the_batch(recipe, mesh_shape, "MaxText", "takes a whole batch per device")
        shape: dict[str, str | int | float] = {
            "model_name": "default",
            "base_num_decoder_layers": model.num_layers,
            "base_emb_dim": model.d_model,
            "base_num_query_heads": model.num_heads,
            "base_mlp_dim": model.ffn_dim,
            "head_dim": model.d_model // model.num_heads,
            "vocab_size": model.vocab_size,
            "max_target_length": model.seq_len,
            "normalization_layer_epsilon": model.norm_eps,
        }
        if isinstance(model, LlamaConfig):
            shape |= {
                "decoder_block": "llama2",
                "base_num_kv_heads": model.num_kv_heads,
                "rope_max_timescale": model.rope_theta,
                "logits_via_embedding": "false",
            }
        else:  # gpt3: learned positions, GELU MLP with biases, tied embeddings
            shape |= {
                "decoder_block": "gpt3",
                "base_num_kv_heads": model.num_heads,
                "mlp_activations": '["gelu"]',
                "trainable_position_size": model.seq_len,
                "logits_via_embedding": "true",
                # The output projection is the embedding table itself, logits unscaled (MaxText's default
                # divides them by sqrt(d_model); its own gpt3 configurations do not).
                "normalize_embedding_logits": "false",
            }
        decay_steps = opt.decay_steps or train.steps
        settings: dict[str, str | int | float] = {
            **shape,
            **PRECISION[train.precision],
            "attention": ATTENTION[train.attention],
            "remat_policy": REMAT[train.remat],
            "per_device_batch_size": train.global_batch // devices,
            "steps": train.steps,
            "init_weights_seed": train.seed,  # its synthetic batch has a fixed key: no data seed to set
            "opt_type": "adamw",
            "learning_rate": opt.learning_rate,
            "lr_schedule_type": "cosine",
            # MaxText's cosine reaches its final rate at the schedule's last step, optax's one step later: one
            # step longer, and int(schedule steps x fraction) warmup steps (half a step over rounds to ours).
            "learning_rate_schedule_steps": decay_steps + 1,
            "warmup_steps_fraction": (min(opt.lr_warmup_steps, decay_steps - 1) + 0.5) / (decay_steps + 1),
            "learning_rate_final_fraction": opt.min_lr_ratio,
            "adam_b1": opt.b1,
            "adam_b2": opt.b2,
            "adam_eps": opt.eps,
            "adam_weight_decay": opt.weight_decay,
            "adamw_mask": json.dumps(NO_DECAY),
            "gradient_clipping_threshold": opt.grad_clip or 0.0,
            "ici_data_parallelism": mesh_shape.get("data", 1),
            "ici_fsdp_parallelism": mesh_shape.get("fsdp", 1),
            "ici_tensor_parallelism": mesh_shape.get("tensor", 1),
            "hardware": "gpu" if platform == "gpu" else "cpu",
            "skip_jax_distributed_system": "true",
            "dataset_type": "synthetic",
            "enable_dropout": "false",
            "enable_checkpointing": "false",
            "enable_tensorboard": "false",
            "run_name": "jaxbench",
        }
        return {key: value if isinstance(value, str) else _number(value) for key, value in settings.items()}

    def start(self, config: dict[str, str], python: Path, artifacts: Path) -> TrainerCommand:
        run = {
            "base_output_directory": str(artifacts / "output"),
            "metrics_file": str(artifacts / METRICS_FILE),
            # MaxText compiles its step twice (ahead of time, then at step 0) through jax's persistent cache,
            # ~/jax_cache by default: a cache of its own per run keeps one run's compile time from depending
            # on what ran before.
            "jax_cache_dir": str(artifacts / "jax-cache"),
        }
        argv = [
            str(python),
            str(LAUNCH),
            "--count-params",
            COUNT_PARAMS,
            "--module",
            TRAINER,
            "--",
            "{package:maxtext}/configs/base.yml",
            *(f"{key}={value}" for key, value in {**config, **run}.items()),
        ]
        return TrainerCommand(argv)

    def progress(self, line: str) -> StepRecord | None:
        match = _STEP_LINE.search(line)
        if match is None:
            return None
        return StepRecord(int(match["step"]), float(match["seconds"]), float(match["loss"]))

    def read(self, config: dict[str, str], artifacts: Path, log: str) -> TrainerReport:
        path = artifacts / METRICS_FILE
        steps = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                row = json.loads(line)
                steps.append(
                    StepRecord(
                        step=int(row["step"]),
                        seconds=float(row["perf/step_time_seconds"]),
                        loss=float(row["learning/loss"]),
                        tflops_per_device=row.get("perf/per_device_tflops_per_sec"),
                        tokens_per_s_per_device=row.get("perf/per_device_tokens_per_sec"),
                    )
                )
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: expected MaxText's per-step metrics: {error}") from error
        return TrainerReport(steps, parameter_count(log), compile_seconds(log))

    def optimal_loss(self, recipe: Recipe) -> float:
        # MaxText's synthetic data is one batch of uniformly random tokens, repeated every step: a model can
        # learn it by heart.
        return 0.0


def _seconds_of_day(line: str) -> float | None:
    match = _GLOG_TIME.match(line)
    if match is None:
        return None
    hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def compile_seconds(log: str) -> float | None:
    """State initialisation plus lowering and compilation of the train step, from MaxText's log times."""
    start = end = None
    for line in log.splitlines():
        if start is None and _COMPILE_START.search(line):
            start = _seconds_of_day(line)
        elif start is not None and _COMPILE_END in line:
            end = _seconds_of_day(line)
            break
    if start is None or end is None:
        return None
    return (end - start) % 86400  # a run that crosses midnight


class MaxTextBackend(FrameworkBackend):
    def __init__(self) -> None:
        super().__init__(MaxText())
