"""Typed, frozen recipe configuration: the schema every recipe file and every `--set` override passes.

Configuration flows one way: YAML (recipes/*.yaml) -> `harness.recipes.load` -> `Recipe` -> code.
The model section's type depends on the family (see `harness.families.FAMILIES`); everything else is shared.
No JAX here: commands that only read recipes never start a backend.

    jaxbench recipes          # lists every family and size, after validating them all
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from jaxbench.core.schema import Strict
from jaxbench.harness.measure import flops

MESH_AXES: tuple[str, ...] = ("data", "fsdp", "tensor")

PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""What recipe and size names may be: they become parts of file names (a result, a framework's artifacts)
and of the tables a run prints, so a '/', a leading '.' or a '[' would write elsewhere or break the table."""


def plain_name(value: str, what: str = "name") -> str:
    """`value` unchanged if it is a plain name (PLAIN_NAME); ValueError naming `what` otherwise."""
    if not PLAIN_NAME.fullmatch(value):
        raise ValueError(
            f"{what} {value!r}: expected a plain name (letters, digits, '.', '_' and '-', starting with a "
            "letter or digit)"
        )
    return value


PlainName = Annotated[str, AfterValidator(plain_name)]


INT64_MAX = 2**63 - 1
"""The largest integer a setting may be: numpy and jax take signed 64-bit integers at most, and a larger one
would only fail once the run is compiling, as a failed result instead of invalid input."""
STEP_LIMIT = 2**31 - 1
"""The most steps a count of steps may be: optax counts steps in int32 (its schedules' step count)."""
SEED_LIMIT = INT64_MAX
"""The largest seed: jax.random.key takes a signed 64-bit integer, numpy's generators (the synthetic data)
a non-negative one."""

Steps = Annotated[int, Field(le=STEP_LIMIT)]


def _integers(value: Any) -> list[int]:
    """The integers in a setting's value (not bools), through lists and mappings; nested sections check
    their own."""
    pending, found = [value], []
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            found.append(item)
    return found


class Section(Strict):
    """A part of a recipe: strict and frozen (core/schema.py), every float finite (an infinite learning
    rate would run, and be stored as null) and every integer within 64 bits (INT64_MAX), each refused with
    its key path."""

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _within_64_bits(cls, value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value
        for number in _integers(value):
            if not -INT64_MAX - 1 <= number <= INT64_MAX:
                raise ValueError(f"{number} does not fit in 64 bits; expected at most {INT64_MAX} in size")
        return value


class Precision(enum.StrEnum):
    FP32 = "fp32"
    """float32 everywhere (matmuls use the backend's default precision, TF32 on NVIDIA tensor cores)."""
    BF16 = "bf16"
    """bfloat16 compute with float32 master weights and optimizer state."""
    FP8 = "fp8"
    """bf16 compute with FP8 (E4M3 forward, E5M2 gradients) matmuls in the transformer blocks."""


class AttentionImpl(enum.StrEnum):
    XLA = "xla"
    CUDNN = "cudnn"


class RematPolicy(enum.StrEnum):
    """What the backward pass may keep from the forward pass of each block (jax.checkpoint_policies)."""

    NONE = "none"
    """No rematerialization: keep every activation (fastest, most memory)."""
    FULL = "full"
    """Recompute the whole block in the backward pass (least memory)."""
    DOTS = "dots"
    """Save matmul outputs, recompute the rest."""
    DOTS_NO_BATCH = "dots_no_batch"
    """Save matmul outputs that have no batch dimension (weights-only contractions)."""


class ModelConfig(Section):
    """Architecture of one model family; subclasses live in harness/families/<family>.py, registered by name
    in harness/families/__init__.py.

    Each subclass owns how to build its model (imported only then: its Flax code is
    harness/models/<family>.py) and how many FLOPs one training step costs, so the harness and
    `jaxbench flops` share one count.
    """

    unit: ClassVar[str]
    """What one throughput unit is: "token" for language models, "image" for vision models."""

    def units_per_example(self) -> int:
        raise NotImplementedError

    def training_flops_per_unit(self) -> float:
        raise NotImplementedError

    def param_count(self) -> int:
        raise NotImplementedError

    def with_sequence_length(self, length: int) -> Self:
        raise NotImplementedError

    def build(self, numerics: Any, *, rngs: Any) -> Any:
        """The flax.nnx model, with float32 master weights annotated with logical axis names."""
        raise NotImplementedError


class TransformerConfig(ModelConfig):
    """Fields every family shares: a stack of num_layers blocks of width d_model with num_heads heads."""

    num_layers: Annotated[int, Field(gt=0)]
    d_model: Annotated[int, Field(gt=0)]
    """Width of the residual stream."""
    num_heads: Annotated[int, Field(gt=0)]

    @model_validator(mode="after")
    def _heads_divide_width(self) -> Self:
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of num_heads ({self.num_heads})")
        return self

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def shape(self) -> flops.TransformerShape:
        raise NotImplementedError


class LanguageModelConfig(TransformerConfig):
    """Decoder-only language models: throughput in tokens, FLOPs per token at seq_len."""

    unit: ClassVar[str] = "token"

    vocab_size: Annotated[int, Field(gt=1)]
    seq_len: Annotated[int, Field(gt=0)]
    """Tokens per training sequence."""

    def units_per_example(self) -> int:
        return self.seq_len

    def with_sequence_length(self, length: int) -> Self:
        return self.model_copy(update={"seq_len": length})

    def training_flops_per_unit(self) -> float:
        return flops.decoder_training_flops_per_token(
            self.shape(), vocab_size=self.vocab_size, seq_len=self.seq_len
        )


class TokenDataConfig(Section):
    """The synthetic token stream of the language models (harness/backends/native/data.py: TokenStream)."""

    kind: Literal["random_walk"] = "random_walk"
    successors: Annotated[int, Field(ge=2)] = 16
    """Number of distinct offsets (K) a token can be followed by; must be smaller than the vocabulary."""
    zipf_exponent: Annotated[float, Field(ge=0)] = 1.0
    """Offset k (k = 1..K) is drawn with probability proportional to k**-exponent."""


class ImageDataConfig(Section):
    """The synthetic images of the vision models (harness/backends/native/data.py: ImageStream)."""

    kind: Literal["class_patterns"] = "class_patterns"
    label_noise: Annotated[float, Field(ge=0, lt=1)] = 0.1
    """Probability that an image's label is replaced by a uniformly chosen other class."""
    pixel_noise: Annotated[float, Field(ge=0)] = 0.5
    """Standard deviation of the Gaussian noise added to the +-1 class pattern."""


class TrainConfig(Section):
    global_batch: Annotated[int, Field(gt=0)]
    """Examples per step across all devices; must divide evenly over the mesh axes that shard 'batch'."""
    precision: Precision = Precision.BF16
    """Numerics: fp32, bf16 (bf16 compute, fp32 master weights) or fp8 (needs compute capability >= 8.9)."""
    attention: AttentionImpl = AttentionImpl.XLA
    """Implementation passed to jax.nn.dot_product_attention: xla, or cudnn (NVIDIA GPU, bf16 only)."""
    remat: RematPolicy = RematPolicy.NONE
    """Rematerialization policy applied to each transformer block."""
    steps: Annotated[Steps, Field(gt=0)] = 50
    """Total optimizer steps, warmup steps included."""
    warmup_steps: Annotated[Steps, Field(ge=0)] = 5
    """Steps run after compilation but left out of the timing statistics."""
    seed: Annotated[int, Field(ge=0, le=SEED_LIMIT)] = 0
    """Seed for parameter initialisation and the synthetic data stream."""

    @model_validator(mode="after")
    def _some_steps_are_timed(self) -> Self:
        if self.warmup_steps >= self.steps:
            raise ValueError(
                f"warmup_steps ({self.warmup_steps}) must be smaller than steps ({self.steps}), "
                "otherwise no step is timed"
            )
        return self


class OptimizerConfig(Section):
    """AdamW with linear warmup then cosine decay (optax.adamw + optax.warmup_cosine_decay_schedule)."""

    learning_rate: Annotated[float, Field(gt=0)] = 3e-4
    """Peak learning rate, reached at the end of the warmup."""
    lr_warmup_steps: Annotated[Steps, Field(ge=0)] = 10
    """Linear warmup of the learning rate from 0 (not the timing warmup)."""
    min_lr_ratio: Annotated[float, Field(ge=0, le=1)] = 0.1
    """Final learning rate of the cosine decay, as a fraction of the peak."""
    decay_steps: Annotated[Steps, Field(gt=0)] | None = None
    """Length of warmup plus cosine decay; defaults to train.steps."""
    b1: Annotated[float, Field(ge=0, lt=1)] = 0.9
    b2: Annotated[float, Field(ge=0, lt=1)] = 0.95
    eps: Annotated[float, Field(gt=0)] = 1e-8
    weight_decay: Annotated[float, Field(ge=0)] = 0.1
    """Decoupled weight decay, applied to matrices only (not to norms, biases or embeddings' gains)."""
    grad_clip: Annotated[float, Field(gt=0)] | None = 1.0
    """Global gradient-norm clip; null disables it."""


AxisRule = str | tuple[str, ...] | None


class ParallelismConfig(Section):
    mesh: dict[str, int] = Field(default_factory=lambda: {"data": -1, "fsdp": 1, "tensor": 1})
    """Mesh axis sizes over (data, fsdp, tensor); one axis may be -1 to take the remaining devices."""
    rules: dict[str, AxisRule] = Field(default_factory=dict)
    """Logical axis name (used in the model code) -> mesh axis, tuple of mesh axes, or null (replicated)."""

    @model_validator(mode="after")
    def _known_axes(self) -> Self:
        unknown = sorted(set(self.mesh) - set(MESH_AXES))
        if unknown:
            raise ValueError(f"mesh axes must be among {list(MESH_AXES)}; got unknown {unknown}")
        fills = [name for name, size in self.mesh.items() if size == -1]
        if len(fills) > 1:
            raise ValueError(f"at most one mesh axis may be -1; got {fills}")
        bad = {name: size for name, size in self.mesh.items() if size == 0 or size < -1}
        if bad:
            raise ValueError(f"mesh axis sizes must be positive or -1; got {bad}")
        for logical, target in self.rules.items():
            targets = (target,) if isinstance(target, str) else (target or ())
            stray = [t for t in targets if t not in MESH_AXES]
            if stray:
                raise ValueError(
                    f"rule {logical!r} maps to unknown mesh axes {stray}; expected {list(MESH_AXES)}"
                )
        return self

    def axis_rules(self) -> tuple[tuple[str, AxisRule], ...]:
        """The rules in the form flax's `logical_axis_rules` context expects."""
        return tuple(self.rules.items())


class FlagOverrides(Section):
    """Recipe additions to the XLA flag profile (e.g. collective combine thresholds per model size)."""

    xla: dict[str, bool | int | float | str] = Field(default_factory=dict)
    """XLA flag name (no dashes) -> value."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variable -> value."""


class Recipe[ModelT: ModelConfig, DataT: Strict](Section):
    """A fully resolved recipe: one family at one size, after overrides.

    Parametrised by the family's model and data sections, e.g. `Recipe[LlamaConfig, TokenDataConfig]`.
    """

    family: PlainName
    """Model family; selects the model section's schema and the model code."""
    size: PlainName
    """Named size within the family (a key of the file's `sizes`)."""
    description: str = ""
    model: ModelT
    data: DataT
    """Synthetic-data generator settings (schema depends on the family's task)."""
    train: TrainConfig
    optimizer: OptimizerConfig = OptimizerConfig()
    parallelism: ParallelismConfig = ParallelismConfig()
    xla_flags: str = "auto"
    """XLA flag profile (recipes/flags/<name>.yaml), or auto: chosen by the GPU generation (cpu on a CPU)."""
    flag_overrides: FlagOverrides = FlagOverrides()

    @property
    def name(self) -> str:
        return f"{self.family}-{self.size}"

    def resolved(self) -> dict[str, Any]:
        """Plain-data form of every setting, as written into results and hashed."""
        return self.model_dump(mode="json")
