"""The Levanter backend: Levanter's own language-model trainer (`levanter.main.train_lm`, its Trainer, its
LlamaLMHeadModel and Gpt2LMHeadModel) in Levanter's own environment (`.venv-levanter` or the levanter image).

Levanter has no synthetic data of its own: it reads documents through its own data pipeline (tokenizer,
Ray-built cache, loader). jaxbench writes it one document, a walk of the recipe's own synthetic stream, so
Levanter's loss has the same optimum as the native run's, and a word-level tokenizer whose words are the
token ids (Levanter's passthrough tokenizer fails on its own probe text, and the hub is out of reach).
Levanter reports through its `json_logger` tracker: per-step loss and duration, and the exact parameter
count, as JSON in its log.

    jaxbench run llama2 --backend levanter
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.backends.framework.program import (
    FrameworkBackend,
    StepRecord,
    TrainerCommand,
    TrainerReport,
    language_model,
)
from jaxbench.harness.backends.native.data import TokenStream, optimal_loss, token_stream
from jaxbench.harness.config import AttentionImpl, Precision, Recipe, RematPolicy
from jaxbench.harness.families.llama2 import LlamaConfig

TRAINER = "levanter.main.train_lm"
CONFIG_FILE = "config.yaml"
DATA_FILE = "data.jsonl"
TOKENIZER_DIR = "tokenizer"

ATTENTION = {AttentionImpl.XLA: "VANILLA", AttentionImpl.CUDNN: "NVTE"}
# Levanter checkpoints its scanned layers whole (carries saved, block internals recomputed) or not at all.
REMAT = {RematPolicy.NONE: False, RematPolicy.FULL: True}
MIXED_PRECISION = {Precision.FP32: "p=f32,c=f32", Precision.BF16: "p=f32,c=bfloat16"}  # fp8: refused
# Decoupled weight decay on every matrix and embedding, not on norms or biases (as the native optimizer).
# Levanter matches it against module paths and class paths ("RmsNorm.weight"), hence case-insensitive.
DECAYED = r"(?i)^(?!.*(?:norm|ln_)).*(?<!bias)$"


class Levanter:
    name = "levanter"
    title = "Levanter"
    module = "levanter"
    trainer = TRAINER
    distribution = "levanter"
    component = "levanter"
    extra_env: Mapping[str, str] = MappingProxyType(
        {"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    )

    def __init__(self) -> None:
        self._losses: dict[int, float] = {}
        """A step's loss, until the record with its duration arrives (progress)."""

    def check(self, recipe: Recipe) -> None:
        # remat policies other than full and none, and fp8: refused by the registry entry.
        model = language_model(recipe)
        if not isinstance(model, LlamaConfig) and model.ffn_dim % model.d_model:
            raise InvalidInput(
                f"model.ffn_dim={model.ffn_dim}: Levanter's GPT-2 block takes a whole multiple of "
                f"model.d_model ({model.d_model}) with --backend levanter"
            )

    def configure(self, recipe: Recipe, mesh_shape: Mapping[str, int], platform: str) -> LevanterRun:
        model, train, opt = language_model(recipe), recipe.train, recipe.optimizer
        shape: dict[str, Any] = {
            "seq_len": model.seq_len,
            "hidden_dim": model.d_model,
            "num_layers": model.num_layers,
            "num_heads": model.num_heads,
            "layer_norm_epsilon": model.norm_eps,
            "attn_backend": ATTENTION[train.attention],
            "gradient_checkpointing": REMAT[train.remat],
        }
        if isinstance(model, LlamaConfig):
            shape |= {
                "type": "llama",
                "intermediate_dim": model.ffn_dim,
                "num_kv_heads": model.num_kv_heads,
                "tie_word_embeddings": False,
                "rope": {"type": "default", "theta": model.rope_theta},
            }
        else:  # GPT-3 is GPT-2's architecture: learned positions, tanh-GELU MLP with biases, tied embeddings
            shape |= {"type": "gpt2", "mlp_scale": model.ffn_dim // model.d_model, "use_bias": True}
        tensor = mesh_shape.get("tensor", 1)
        trainer: dict[str, Any] = {
            "seed": train.seed,
            "mp": MIXED_PRECISION[train.precision],
            "train_batch_size": train.global_batch,
            "num_train_steps": train.steps,
            "steps_per_eval": 10**9,
            "tracker": {"type": "json_logger"},
            # Diagnostics, not training: its norm watch (a callback every 10 steps) and jaxpr and HLO dumps.
            "watch": {"interval": 0},
            "log_jaxprs": False,
            "log_xla_hlo": False,
            "require_accelerator": platform != "cpu",
            # Levanter's axes: replica (pure data parallel), data (FSDP, what remains), model (tensor).
            "replica_ici_axis_size": mesh_shape.get("data", 1),
            "model_axis_size": tensor,
        }
        if tensor > 1:
            trainer["tensor_parallel_axes"] = ["mlp", "heads"]
        decay_steps = opt.decay_steps or train.steps
        warmup = min(opt.lr_warmup_steps, decay_steps - 1)
        optimizer: dict[str, Any] = {
            "type": "adam",
            "learning_rate": opt.learning_rate,
            "weight_decay": opt.weight_decay,
            "weight_decay_modules": DECAYED,
            "default_weight_decay_mask": False,
            "beta1": opt.b1,
            "beta2": opt.b2,
            "epsilon": opt.eps,
            "max_grad_norm": opt.grad_clip,
            # Levanter reads a warmup of at most 1 as a fraction of the run: one step is 1 / steps of it.
            "warmup": warmup if warmup != 1 else 1 / train.steps,
            "min_lr_ratio": opt.min_lr_ratio,
            "lr_schedule": "cosine",
        }
        if decay_steps != train.steps:
            optimizer["decay"] = decay_steps - warmup
        settings = {"model": shape, "trainer": trainer, "optimizer": optimizer, "data_seed": train.seed}
        stream = token_stream(recipe.data, model, train.global_batch, train.seed)
        # Levanter cuts the document into windows of seq_len tokens: one per example, and one spare.
        tokens = (train.steps * train.global_batch + 1) * model.seq_len
        return LevanterRun(settings, stream, tokens, math.prod(mesh_shape.values()))

    def start(self, config: LevanterRun, python: Path, artifacts: Path) -> TrainerCommand:
        tokenizer = artifacts / TOKENIZER_DIR
        write_tokenizer(tokenizer, config.stream.vocab_size)
        hub = artifacts / "hf-hub"
        if config.settings["model"]["type"] == "gpt2":
            offline_gpt2_reference(hub, tokenizer)
        walk = config.stream.host_walk(config.tokens)
        (artifacts / DATA_FILE).write_text(json.dumps({"text": " ".join(map(str, walk.tolist()))}) + "\n")
        settings = dict(config.settings)
        if settings["model"]["type"] == "llama":
            settings["model"] = {**settings["model"], "tokenizer": str(tokenizer)}
        settings["data"] = {
            "train_urls": [(artifacts / DATA_FILE).resolve().as_uri()],
            "tokenizer": str(tokenizer),
            "cache_dir": str(artifacts / "cache"),
            "enforce_eos": False,
        }
        settings["trainer"] = {
            **settings["trainer"],
            "log_dir": str(artifacts / "logs"),
            "checkpointer": {"base_path": str(artifacts / "checkpoints"), "save_interval": "10000h"},
        }
        (artifacts / CONFIG_FILE).write_text(yaml.safe_dump(settings, sort_keys=False))
        argv = [str(python), "-m", TRAINER, "--config_path", str(artifacts / CONFIG_FILE)]
        return TrainerCommand(argv, {"HF_HUB_CACHE": str(hub)})

    def progress(self, line: str) -> StepRecord | None:
        record = tracker_record(line)
        if record is None or record.get("event") != "log" or record.get("step") is None:
            return None
        step, metrics = int(record["step"]), record.get("metrics") or {}
        if "train/loss" in metrics:
            self._losses[step] = float(metrics["train/loss"])
        # A step's loss and its duration come in two records, the loss first: a step is done at the second.
        if "throughput/duration" not in metrics or step not in self._losses:
            return None
        return StepRecord(step, float(metrics["throughput/duration"]), self._losses.pop(step))

    def read(self, config: LevanterRun, artifacts: Path, log: str) -> TrainerReport:
        losses: dict[int, float] = {}
        durations: dict[int, float] = {}
        gflops: dict[int, float] = {}
        tokens: dict[int, float] = {}
        count = None
        devices = config.devices
        for line in log.splitlines():
            record = tracker_record(line)
            if record is None:
                continue
            metrics = record.get("metrics") or {}
            if record.get("event") == "summary":
                count = metrics.get("parameter_count", count)
                continue
            if record.get("event") != "log" or record.get("step") is None:
                continue
            step = int(record["step"])
            for name, into in (
                ("train/loss", losses),
                ("throughput/duration", durations),
                ("throughput/gflops_per_second", gflops),
                ("throughput/tokens_per_second", tokens),
            ):
                if name in metrics:
                    into.setdefault(step, float(metrics[name]))  # the last step is logged twice
        steps = [
            StepRecord(
                step,
                durations[step],
                losses[step],
                gflops[step] / 1e3 / devices if step in gflops else None,
                tokens[step] / devices if step in tokens else None,
            )
            for step in sorted(durations)
            if step in losses
        ]
        return TrainerReport(steps, None if count is None else int(count))

    def optimal_loss(self, recipe: Recipe) -> float:
        return optimal_loss(recipe)  # it reads the recipe's own stream


@dataclasses.dataclass(frozen=True)
class LevanterRun:
    settings: dict[str, Any]
    """train_lm's configuration, less the paths of this run's files."""
    stream: TokenStream
    tokens: int
    """Length of the document Levanter reads."""
    devices: int
    """Levanter logs global throughput; jaxbench keeps it per device."""


def tracker_record(line: str) -> dict[str, Any] | None:
    """The JSON of a json_logger line (`... levanter.json_logger ... INFO :: {...}`)."""
    marker = line.find(' :: {"tracker": "json_logger"')
    if marker < 0:
        return None
    try:
        record = json.loads(line[marker + 4 :])
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def write_tokenizer(directory: Path, vocab_size: int) -> None:
    """A word-level tokenizer whose words are the token ids, in the Hugging Face tokenizers format."""
    directory.mkdir(parents=True, exist_ok=True)
    model = {"type": "WordLevel", "vocab": {str(i): i for i in range(vocab_size)}, "unk_token": "0"}
    tokenizer: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": model,
    }
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"})
    )


def offline_gpt2_reference(hub: Path, tokenizer: Path) -> None:
    """Levanter's GPT-2 names the hub's `gpt2` checkpoint for exporting to Hugging Face and loads its config
    and tokenizer when it starts, even when nothing is exported. Offline, a private hub cache holds a GPT-2
    config and this run's tokenizer under that name, so nothing is fetched and nothing else is read."""
    snapshot = hub / "models--gpt2" / "snapshots" / "jaxbench"
    snapshot.mkdir(parents=True, exist_ok=True)
    (hub / "models--gpt2" / "refs").mkdir(exist_ok=True)
    (hub / "models--gpt2" / "refs" / "main").write_text("jaxbench")
    (snapshot / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (snapshot / name).write_text((tokenizer / name).read_text())


class LevanterBackend(FrameworkBackend):
    def __init__(self) -> None:
        super().__init__(Levanter())
