"""From a validated recipe to a compiled, sharded training step: mesh, model, optimizer, data, jit.

The step is compiled ahead of time (`jit(...).lower(...).compile()`), so compilation is timed on its own and
a shape change can never trigger a silent recompilation between timed steps. The train state stays on the
devices and is donated to each step; the synthetic batch is generated inside the step from the step counter.

    jaxbench run gpt3 --size tiny
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from jaxbench.harness.backends.native.data import SyntheticStream, stream_for
from jaxbench.harness.config import MESH_AXES, OptimizerConfig, Recipe
from jaxbench.harness.models.layers import SHARDING, STATE_LEAVES, Numerics, constrain
from jaxbench.harness.runtime import preflight


class TrainState(NamedTuple):
    """Everything a step updates. Also used with shapes or shardings in place of arrays, hence `Any`."""

    step: Any
    params: Any
    opt_state: Any


StepFn = Callable[[TrainState], tuple[TrainState, dict[str, jax.Array]]]


@dataclasses.dataclass(frozen=True)
class TrainProgram:
    mesh: Mesh
    mesh_shape: dict[str, int]
    stream: SyntheticStream
    state: TrainState
    step: StepFn
    """The compiled step: state -> (next state, {"loss", "grad_norm"}). The input state is donated."""
    compile_s: float
    compiled_memory: dict[str, int | None]
    hlo_text: str | None
    """The step's optimized HLO (None where the backend cannot print it)."""
    cost: dict[str, float]
    input_text: str | None = None
    """The step as JAX handed it to XLA (the lowered StableHLO, without debug locations)."""


def numerics_for(recipe: Recipe) -> Numerics:
    return Numerics(recipe.train.precision, recipe.train.attention, recipe.train.remat)


def make_mesh(mesh_shape: dict[str, int], devices: Sequence[Any]) -> Mesh:
    """A mesh over (data, fsdp, tensor), devices ordered by jax for the interconnect topology (NVLink
    within a host before the network between hosts). Auto axes: XLA propagates shardings between the
    annotated parameters and activations."""
    sizes = [mesh_shape[axis] for axis in MESH_AXES]
    return jax.make_mesh(sizes, MESH_AXES, axis_types=(AxisType.Auto,) * len(sizes), devices=devices)


def build_optimizer(cfg: OptimizerConfig, total_steps: int, decay_mask: Any) -> optax.GradientTransformation:
    decay_steps = cfg.decay_steps or total_steps
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=cfg.learning_rate,
        # optax needs at least one step of cosine after the warmup; short runs shorten the warmup.
        warmup_steps=min(cfg.lr_warmup_steps, decay_steps - 1),
        decay_steps=decay_steps,
        end_value=cfg.learning_rate * cfg.min_lr_ratio,
    )
    adamw = optax.adamw(
        schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay, mask=decay_mask
    )
    return optax.chain(optax.clip_by_global_norm(cfg.grad_clip), adamw) if cfg.grad_clip else adamw


# optax.tree_utils.tree_norm from optax 0.2.5; the l2 norm under its older name before (a backfill runs them).
_tree_norm = getattr(optax.tree_utils, "tree_norm", None) or optax.tree_utils.tree_l2_norm


def _is_variable(x: Any) -> bool:
    return isinstance(x, STATE_LEAVES)


def param_specs(params: nnx.State) -> list[preflight.ParamSpec]:
    specs = []
    for path, variable in nnx.to_flat_state(params):
        # A VariableState (flax before 0.11) has no shape of its own; a scalar's () is a shape all the same.
        shape = tuple(variable.shape if hasattr(variable, "shape") else variable.value.shape)
        axes = tuple(variable.get_metadata().get(SHARDING) or (None,) * len(shape))
        specs.append(preflight.ParamSpec("/".join(map(str, path)), shape, axes))
    return specs


def decay_mask(params: nnx.State) -> Any:
    """Decoupled weight decay applies to parameters not marked `weight_decay=False` (norms, biases)."""
    return jax.tree.map(
        lambda v: bool(v.get_metadata().get("weight_decay", True)), params, is_leaf=_is_variable
    )


def cross_entropy(logits: jax.Array, targets: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets).mean()


def _batch_axes(x: jax.Array) -> tuple[str | None, ...]:
    return ("batch",) + (None,) * (x.ndim - 1)


def make_loss_fn(graphdef: nnx.GraphDef) -> Callable[[nnx.State, jax.Array, jax.Array], jax.Array]:
    def loss_fn(params: nnx.State, inputs: jax.Array, targets: jax.Array) -> jax.Array:
        model = nnx.merge(graphdef, params)
        return cross_entropy(model(inputs), targets)

    return loss_fn


def make_step_fn(
    graphdef: nnx.GraphDef, stream: SyntheticStream, tx: optax.GradientTransformation, data_key: jax.Array
) -> StepFn:
    loss_fn = make_loss_fn(graphdef)

    def train_step(state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        inputs, targets = stream.batch(jax.random.fold_in(data_key, state.step))
        inputs, targets = constrain(inputs, _batch_axes(inputs)), constrain(targets, _batch_axes(targets))
        loss, grads = jax.value_and_grad(loss_fn)(state.params, inputs, targets)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = {"loss": loss, "grad_norm": _tree_norm(grads)}
        return TrainState(state.step + 1, params, opt_state), metrics

    return train_step


def _memory_analysis(compiled: Any) -> dict[str, int | None]:
    try:
        analysis = compiled.memory_analysis()
    except Exception:  # not every backend implements it
        analysis = None
    return {
        "temp_bytes": getattr(analysis, "temp_size_in_bytes", None),
        "argument_bytes": getattr(analysis, "argument_size_in_bytes", None),
    }


COST_KEYS = ("flops", "bytes accessed", "transcendentals")
"""What the result keeps of XLA's cost analysis; the rest are per-operand byte counts."""


def _cost_analysis(compiled: Any) -> dict[str, float]:
    try:
        analysis = compiled.cost_analysis()
    except Exception:  # not every backend implements it
        return {}
    if isinstance(analysis, list):  # jax before 0.4.36 gave one dict per device program
        analysis = analysis[0] if analysis else {}
    return {key: float(analysis[key]) for key in COST_KEYS if isinstance(analysis.get(key), int | float)}


def _hlo_text(program: Any) -> str | None:
    """The text of a compiled (optimized HLO) or lowered (StableHLO) program; None where there is none."""
    try:
        text = program.as_text()
    except Exception:  # a backend without HLO text (none known): the run goes on without a fingerprint
        return None
    return text if isinstance(text, str) and text else None


_mesh_context = getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh")  # noqa: B009
"""jax.set_mesh, named jax.sharding.use_mesh before jax 0.7: a backfill runs older releases too."""


@contextmanager
def sharding_context(recipe: Recipe, mesh: Mesh) -> Iterator[None]:
    """Trace model code under this: it resolves the models' logical axis names with the recipe's rules."""
    with _mesh_context(mesh), nn.logical_axis_rules(recipe.parallelism.axis_rules()):
        yield


@dataclasses.dataclass(frozen=True)
class Initialized:
    graphdef: nnx.GraphDef
    state: TrainState
    shardings: TrainState
    tx: optax.GradientTransformation
    stream: SyntheticStream
    data_key: jax.Array


def initialize(recipe: Recipe, mesh: Mesh, mesh_shape: dict[str, int]) -> Initialized:
    """The sharded initial train state, created on the devices by one jit. Call inside sharding_context.

    Raises RecipeError, before compiling anything, if the parameters cannot be sharded as the rules say.
    """
    numerics = numerics_for(recipe)
    init_key, data_key = jax.random.split(jax.random.key(recipe.train.seed))
    stream = stream_for(recipe)

    def create_model() -> nnx.Module:
        return recipe.model.build(numerics, rngs=nnx.Rngs(params=init_key))

    graphdef, abstract_params = nnx.split(nnx.eval_shape(create_model))
    preflight.check_param_sharding(param_specs(abstract_params), recipe.parallelism, mesh_shape)
    tx = build_optimizer(recipe.optimizer, recipe.train.steps, decay_mask(abstract_params))

    def init() -> TrainState:
        params = nnx.state(create_model())
        return TrainState(jnp.zeros((), jnp.int32), params, tx.init(params))

    abstract = TrainState(
        jax.ShapeDtypeStruct((), jnp.int32), abstract_params, jax.eval_shape(tx.init, abstract_params)
    )
    shardings = _state_shardings(abstract, tx, mesh)
    lowered = jax.jit(init, out_shardings=shardings).lower()
    # XLA:CPU spends seconds optimising the random-number code of this run-once initialiser, for nothing.
    options = {"xla_backend_optimization_level": 0} if mesh.devices.flat[0].platform == "cpu" else None
    state = lowered.compile(compiler_options=options)()
    return Initialized(graphdef, state, shardings, tx, stream, data_key)


def prepare(
    recipe: Recipe,
    mesh_shape: dict[str, int],
    devices: Sequence[Any],
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> TrainProgram:
    """Initialise the sharded state and compile the step ahead of time (timed)."""
    mesh = make_mesh(mesh_shape, devices)
    with sharding_context(recipe, mesh):
        init = initialize(recipe, mesh, mesh_shape)
        step = jax.jit(
            make_step_fn(init.graphdef, init.stream, init.tx, init.data_key),
            in_shardings=(init.shardings,),
            out_shardings=(init.shardings, NamedSharding(mesh, PartitionSpec())),
            donate_argnums=0,
        )
        start = clock()
        lowered = step.lower(init.state)
        compiled = lowered.compile()
        compile_s = clock() - start
    return TrainProgram(
        mesh,
        mesh_shape,
        init.stream,
        init.state,
        compiled,
        compile_s,
        _memory_analysis(compiled),
        _hlo_text(compiled),
        _cost_analysis(compiled),
        _hlo_text(lowered),
    )


def _state_shardings(abstract: TrainState, tx: optax.GradientTransformation, mesh: Mesh) -> TrainState:
    replicated = NamedSharding(mesh, PartitionSpec())

    def sharding_of(variable: nnx.Variable) -> nnx.Variable:
        spec = nn.logical_to_mesh_axes(variable.get_metadata().get(SHARDING))
        return variable.replace(NamedSharding(mesh, spec if spec is not None else PartitionSpec()))

    params = jax.tree.map(sharding_of, abstract.params, is_leaf=_is_variable)
    # Adam's moments are laid out like the parameters they track; counters are replicated.
    opt_state = optax.tree_map_params(
        tx,
        lambda _, sharding: sharding,
        abstract.opt_state,
        params,
        transform_non_params=lambda _: replicated,
        is_leaf=_is_variable,
    )
    return TrainState(replicated, params, opt_state)
