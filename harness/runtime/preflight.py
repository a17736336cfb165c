"""Checks of a recipe against the machine, once its devices are known: pure functions on plain data that every
backend's `prepare` runs before anything is compiled (the mesh fills the devices, the batch and every
parameter dimension divide over their shards, the numerics suit the device). The run's inputs themselves
are checked before any backend starts (harness/run/inputs.py).

Each failure is a `RecipeError` naming the recipe key and what was expected, so that a night is never spent
compiling a configuration that cannot run.

    jaxbench run llama2 --size tiny --set parallelism.mesh.tensor=3    # fails here, in well under a second
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from jaxbench.harness.config import MESH_AXES, AttentionImpl, AxisRule, ParallelismConfig, Precision, Recipe
from jaxbench.harness.measure import peaks
from jaxbench.harness.recipes import RecipeError


@dataclasses.dataclass(frozen=True)
class Machine:
    """What preflight needs to know about the devices a run will use."""

    platform: str
    """jax backend platform: "gpu", "cpu", "tpu"."""
    device_kind: str
    device_count: int


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    path: str
    shape: tuple[int, ...]
    logical_axes: tuple[str | None, ...]


def resolve_mesh_shape(mesh: Mapping[str, int], device_count: int) -> dict[str, int]:
    """Axis sizes in MESH_AXES order, with a -1 axis filled so that their product is device_count."""
    sizes = {axis: mesh.get(axis, 1) for axis in MESH_AXES}
    fixed = math.prod(size for size in sizes.values() if size != -1)
    spec = ", ".join(f"{axis}={size}" for axis, size in sizes.items())
    if -1 in sizes.values():
        if device_count % fixed:
            raise RecipeError(
                f"parallelism.mesh ({spec}): the fixed axes multiply to {fixed}, which does not divide "
                f"the {device_count} available devices"
            )
        fill = next(axis for axis, size in sizes.items() if size == -1)
        sizes[fill] = device_count // fixed
    elif fixed != device_count:
        raise RecipeError(
            f"parallelism.mesh ({spec}): the axes multiply to {fixed} but {device_count} devices are "
            "available; make the product equal, or set one axis to -1"
        )
    return sizes


def _targets(rule: AxisRule) -> tuple[str, ...]:
    if rule is None:
        return ()
    return (rule,) if isinstance(rule, str) else tuple(rule)


def shards(rule: AxisRule, mesh_shape: Mapping[str, int]) -> int:
    """How many pieces a dimension with this rule is cut into."""
    return math.prod(mesh_shape[axis] for axis in _targets(rule))


def check_batch(global_batch: int, parallelism: ParallelismConfig, mesh_shape: Mapping[str, int]) -> None:
    rule = parallelism.rules.get("batch")
    pieces = shards(rule, mesh_shape)
    if global_batch % pieces:
        raise RecipeError(
            f"train.global_batch ({global_batch}) must be divisible by the {pieces} shards of the batch "
            f"(parallelism.rules.batch = {rule!r} over mesh {dict(mesh_shape)})"
        )


def check_numerics(precision: Precision, attention: AttentionImpl, machine: Machine) -> None:
    on_gpu = machine.platform == "gpu"
    if precision is Precision.FP8 and not (on_gpu and peaks.supports_fp8(machine.device_kind)):
        raise RecipeError(
            f"train.precision: fp8 needs an NVIDIA GPU with FP8 tensor cores (Ada, Hopper or Blackwell); "
            f"this machine has {machine.device_count} x {machine.device_kind!r} ({machine.platform}). "
            "Use bf16 or fp32."
        )
    if attention is AttentionImpl.CUDNN:
        if not on_gpu:
            raise RecipeError(
                f"train.attention: cudnn needs an NVIDIA GPU; this machine runs on {machine.platform}. "
                "Use --set train.attention=xla."
            )
        if precision is Precision.FP32:
            raise RecipeError(
                "train.attention: cudnn attention supports bf16/fp16 only; use train.precision=bf16 or "
                "train.attention=xla"
            )


def check_param_sharding(
    params: Iterable[ParamSpec], parallelism: ParallelismConfig, mesh_shape: Mapping[str, int]
) -> None:
    """Every parameter axis name has a rule, and every sharded dimension divides evenly."""
    params = list(params)
    missing = sorted({a for p in params for a in p.logical_axes if a is not None} - set(parallelism.rules))
    if missing:
        raise RecipeError(
            f"parallelism.rules has no entry for the parameter axes {missing}; map each to a mesh axis "
            f"among {list(MESH_AXES)}, a list of them, or null (replicated)"
        )
    for param in params:
        used: set[str] = set()
        for dim, axis in zip(param.shape, param.logical_axes, strict=True):
            if axis is None:
                continue
            rule = parallelism.rules[axis]
            # The same mesh axis cannot shard two dimensions of one array; flax keeps the first.
            effective = tuple(t for t in _targets(rule) if t not in used)
            used.update(effective)
            pieces = math.prod(mesh_shape[t] for t in effective)
            if dim % pieces:
                raise RecipeError(
                    f"parallelism.rules.{axis} = {rule!r} cuts dimension {dim} of parameter {param.path} "
                    f"{param.shape} into {pieces} pieces, which does not divide it; "
                    "change the mesh or the rule"
                )


def check(recipe: Recipe, machine: Machine) -> dict[str, int]:
    """Everything that can be checked without the model; returns the resolved mesh shape."""
    check_numerics(recipe.train.precision, recipe.train.attention, machine)
    mesh_shape = resolve_mesh_shape(recipe.parallelism.mesh, machine.device_count)
    check_batch(recipe.train.global_batch, recipe.parallelism, mesh_shape)
    return mesh_shape


def describe_mesh(mesh_shape: Mapping[str, int]) -> str:
    return " x ".join(f"{axis}={size}" for axis, size in mesh_shape.items())
