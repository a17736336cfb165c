"""harness.measure.hlo and hlo_text on optimized HLO that XLA:CPU really emits, plus a hand-written
XLA:GPU-style module.

JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_hlo.py
"""

from __future__ import annotations

import os

# tests/conftest.py sets both before jax is imported; repeated here for running this file on its own.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxbench.harness.measure import hlo, hlo_text
from jaxbench.harness.measure.hlo import OP_CATEGORIES, CountChange, ProgramSummary

Params = tuple[jax.Array, jax.Array]


def mlp(params: Params, x: jax.Array) -> jax.Array:
    w1, w2 = params
    return jnp.tanh(x @ w1) @ w2


# The same computation as mlp, under other function and argument names and on other source lines.
def renamed_mlp(weights: Params, inputs: jax.Array) -> jax.Array:
    first, second = weights
    return jnp.tanh(inputs @ first) @ second


def relu_mlp(params: Params, x: jax.Array) -> jax.Array:
    w1, w2 = params
    return jax.nn.relu(x @ w1) @ w2


def deeper_mlp(params: Params, x: jax.Array) -> jax.Array:
    w1, w2 = params
    square = jnp.ones((w2.shape[1], w2.shape[1]))
    return (jnp.tanh(x @ w1) @ w2) @ square


def _params(hidden: int = 64) -> Params:
    return jnp.ones((32, hidden)), jnp.ones((hidden, 8))


def _compiled(function: Callable[..., Any], *args: Any) -> str:
    text = jax.jit(function).lower(*args).compile().as_text()
    assert text is not None
    return text


@functools.cache
def _forward(function: Callable[[Params, jax.Array], jax.Array], hidden: int = 64) -> str:
    return _compiled(function, _params(hidden), jnp.ones((64, 32)))


@functools.cache
def _gradient(function: Callable[[Params, jax.Array], jax.Array], sharded: bool) -> str:
    """The weight gradient of a squared-error loss; sharded: the batch split over 8 devices, data parallel."""

    def loss(params: Params, x: jax.Array) -> jax.Array:
        return jnp.mean(function(params, x) ** 2)

    x = jnp.ones((64, 32))
    if sharded:
        mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
        x = jax.device_put(x, NamedSharding(mesh, PartitionSpec("data")))
    return _compiled(jax.grad(loss), _params(), x)


# XLA:GPU-style optimized HLO, written by hand because XLA:CPU emits no cuBLAS or cuDNN custom calls and no
# async collectives. Quoted strings hold braces, commas and '%' so that a parser blind to strings goes wrong.
# A backslash at the end of a line joins it with the next: HLO writes each instruction on one long line.
GPU_HLO = """HloModule jit_train_step_0a1b2c, is_scheduled=true, entry_computation_layout=\
{(f32[16,64]{1,0}, f32[64,64]{1,0})->f32[16,64]{1,0}}, frontend_attributes={fingerprint_before_lhs="3f2a9c"},\
 num_partitions=2

%fused_exp (param_0.1: f32[16,64]) -> f32[16,64] {
  %param_0.1 = f32[16,64]{1,0} parameter(0)
  ROOT %exponential.1 = f32[16,64]{1,0} exponential(%param_0.1),\
 metadata={op_name="jit(train_step)/exp" source_file="/src/model.py" source_line=12}
}

%add.clone (x.1: f32[], y.1: f32[]) -> f32[] {
  %x.1 = f32[] parameter(0)
  %y.1 = f32[] parameter(1)
  ROOT %add.2 = f32[] add(%x.1, %y.1)
}

%fused_reduce (param_0.2: f32[16,64]) -> f32[16] {
  %param_0.2 = f32[16,64]{1,0} parameter(0)
  %constant.3 = f32[] constant(0)
  ROOT %reduce.1 = f32[16]{0} reduce(%param_0.2, %constant.3), dimensions={1}, to_apply=%add.clone
}

%fused_gemm (param_0.3: f32[16,64], param_1.3: f32[64,64]) -> f32[16,64] {
  %param_0.3 = f32[16,64]{1,0} parameter(0)
  %param_1.3 = f32[64,64]{1,0} parameter(1)
  ROOT %dot.3 = f32[16,64]{1,0} dot(%param_0.3, %param_1.3), lhs_contracting_dims={1},\
 rhs_contracting_dims={0}
}

ENTRY %main.42 (x.2: f32[16,64], w.1: f32[64,64]) -> f32[16,64] {
  %x.2 = f32[16,64]{1,0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  %w.1 = f32[64,64]{1,0} parameter(1), metadata={op_name="w"}
  %custom-call.1 = (f32[16,64]{1,0}, s8[4194304]{0}) custom-call(%x.2, %w.1),\
 custom_call_target="__cublas$lt$matmul", backend_config={"operation_queue_id":"0",\
"wait_on_operation_queues":[],"gemm_backend_config":{"alpha_real":1,"beta":0,\
"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],\
"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"precision_config":{"operand_precision":["DEFAULT",\
"DEFAULT"],"algorithm":"ALG_UNSET"},"epilogue":"DEFAULT"},"force_earliest_schedule":false},\
 metadata={op_name="jit(train_step)/pjit[name={inner}, donated=(0,)]/dot_general"\
 source_file="/src/model.py" source_line=10}
  %get-tuple-element.1 = f32[16,64]{1,0} get-tuple-element(%custom-call.1), index=0
  %custom-call.2 = (f32[16,64]{1,0}, s8[4194304]{0}) custom-call(%get-tuple-element.1, %w.1),\
 custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"alpha_real":1,\
"epilogue":"DEFAULT"}}
  %get-tuple-element.2 = f32[16,64]{1,0} get-tuple-element(%custom-call.2), index=0
  %custom-call.3 = (f32[16,64]{1,0}, f32[16]{0}, u8[0]{0}) custom-call(%get-tuple-element.2,\
 %get-tuple-element.1, /*index=2*/%get-tuple-element.2), custom_call_target="__cudnn$fmhaSoftmax",\
 operand_layout_constraints={f32[16,64]{1,0}, f32[16,64]{1,0}, f32[16,64]{1,0}},\
 backend_config={"operation_queue_id":"0","cudnn_fmha_backend_config":{"algorithm":{"algo_id":"0",\
"math_type":"TENSOR_OP_MATH","tuning_knobs":{"17":"1","24":"0"},"is_cudnn_frontend":true,\
"workspace_size":"0"},"fmha_scale":0.125,"intermediate_tensor_shape":{"element_type":"F32",\
"dimensions":["16","64"]},"mask_type":"NO_MASK"}}
  %get-tuple-element.3 = f32[16,64]{1,0} get-tuple-element(%custom-call.3), index=0
  %all-reduce-start = f32[16,64]{1,0} all-reduce-start(%get-tuple-element.3), channel_id=1,\
 replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add.clone,\
 backend_config={"collective_backend_config":{"is_sync":false,"no_parallel_custom_call":false}}
  %all-reduce-done = f32[16,64]{1,0} all-reduce-done(%all-reduce-start)
  %all-gather-start = (f32[8,64]{1,0}, f32[16,64]{1,0}) all-gather-start(%all-reduce-done), channel_id=2,\
 replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
  %all-gather-done = f32[16,64]{1,0} all-gather-done(%all-gather-start)
  %collective-permute-start = (f32[16,64]{1,0}, f32[16,64]{1,0})\
 collective-permute-start(%all-gather-done), channel_id=3, source_target_pairs={{0,1},{1,0}}
  %collective-permute-done = f32[16,64]{1,0} collective-permute-done(%collective-permute-start)
  %loop_exp_fusion = f32[16,64]{1,0} fusion(%collective-permute-done), kind=kLoop, calls=%fused_exp,\
 metadata={op_name="jit(train_step)/exp"}
  %input_reduce_fusion = f32[16]{0} fusion(%loop_exp_fusion), kind=kInput, calls=%fused_reduce
  %gemm_fusion = f32[16,64]{1,0} fusion(%loop_exp_fusion, %w.1), kind=kCustom, calls=%fused_gemm,\
 backend_config={"fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":{"block_m":"16",\
"block_n":"64","block_k":"32","split_k":"1","num_stages":"1","num_warps":"4","num_ctas":"1"}}}
  %custom-call.4 = f32[16,64]{1,0} custom-call(%gemm_fusion, %input_reduce_fusion),\
 custom_call_target="__triton", backend_config={"name":"softmax}{, 100%done",\
"ir":"tt.func @k(%arg0: !tt.ptr<f32>) {}"}, opaque="k\\"}{, %y"
  ROOT %copy.1 = f32[16,64]{1,0} copy(%custom-call.4), frontend_attributes={_xla_stream_annotation="1"}
}
"""


def test_the_same_program_under_other_names_and_lines_has_one_fingerprint() -> None:
    for first, second in [
        (_forward(mlp), _forward(renamed_mlp)),
        (_gradient(mlp, True), _gradient(renamed_mlp, True)),
    ]:
        # The texts differ (module and argument names, source lines), or the test would show nothing.
        assert first != second
        assert hlo_text.fingerprint(first) == hlo_text.fingerprint(second)
        assert hlo_text.normalize(first) == hlo_text.normalize(second)


def test_normalize_drops_names_and_source_locations_but_keeps_the_program() -> None:
    text = _forward(mlp)
    assert "test_hlo.py" in text and "metadata=" in text and "jit_mlp" in text
    normalized = hlo_text.normalize(text)
    for gone in ("test_hlo.py", "FileNames", "StackFrames", "metadata=", "jit_mlp", "fused_computation"):
        assert gone not in normalized
    for kept in ("dot(", "tanh(", "f32[64,32]", "lhs_contracting_dims={1}", "kind=kLoop"):
        assert kept in normalized


def test_a_changed_shape_or_op_changes_the_fingerprint() -> None:
    fingerprints = [
        hlo_text.fingerprint(_forward(mlp)),
        hlo_text.fingerprint(_forward(mlp, hidden=128)),
        hlo_text.fingerprint(_forward(relu_mlp)),
        hlo_text.fingerprint(_forward(deeper_mlp)),
    ]
    assert len(set(fingerprints)) == len(fingerprints)
    assert all(len(f) == 64 and int(f, 16) >= 0 for f in fingerprints)


def test_normalize_is_idempotent_and_keeps_the_summary() -> None:
    for text in (_forward(mlp), _gradient(mlp, True), GPU_HLO, _compiled(_scanned, jnp.ones((4, 8)))):
        normalized = hlo_text.normalize(text)
        assert hlo_text.normalize(normalized) == normalized
        assert hlo.summarize(normalized) == hlo.summarize(text)


def _scanned(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    def body(carry: jax.Array, _: None) -> tuple[jax.Array, jax.Array]:
        return jnp.sin(carry) * 2, carry.sum()

    return jax.lax.scan(body, x, None, length=5)


@pytest.mark.parametrize(
    ("opcode", "attributes", "category"),
    [
        ("dot", ", lhs_contracting_dims={0}, rhs_contracting_dims={0}", "matmul"),
        ("convolution", ", dim_labels=b0f_0io->b0f", "matmul"),
        ("custom-call", ', custom_call_target="__cublas$gemm"', "matmul"),
        ("custom-call", ', custom_call_target="__cudnn$fmhaScaleBiasSoftmaxBackward"', "attention"),
        ("custom-call", ', custom_call_target="__cudnn$convForward"', "matmul"),
        ("custom-call", ', custom_call_target="xla_python_cpu_callback"', "custom-call"),
        ("reduce-scatter", ", dimensions={0}, to_apply=%add", "collective"),
        ("all-to-all", ", dimensions={0}", "collective"),
        ("collective-permute-done", "", "collective"),
        ("fusion", ", kind=kOutput, calls=%fused", "fusion"),
        ("tanh", "", "elementwise"),
        ("exponential", "", "elementwise"),
        ("select", "", "elementwise"),
        ("reduce-window", ", window={size=2}, to_apply=%add", "reduce"),
        ("copy-start", "", "copy"),
        ("transpose", ", dimensions={0}", "data-movement"),
        ("dynamic-update-slice", "", "data-movement"),
        ("bitcast", "", "data-movement"),
        ("while", ", condition=%cond, body=%body", "control-flow"),
        ("async-start", ", calls=%wrapped_reduce_scatter", "control-flow"),
        ("get-tuple-element", ", index=0", "other"),
        ("iota", ", iota_dimension=0", "other"),
    ],
)
def test_each_opcode_falls_into_its_category(opcode: str, attributes: str, category: str) -> None:
    text = f"ENTRY %main (p: f32[2]) -> f32[2] {{\n  ROOT %r = f32[2]{{0}} {opcode}(%p){attributes}\n}}\n"
    assert hlo.summarize(text).ops == {category: 1}


def test_summarize_counts_the_two_matmuls_of_an_mlp() -> None:
    summary = hlo.summarize(_forward(mlp))
    # XLA:CPU fuses each dot into a kCustom fusion and tanh into a kLoop one; dots count wherever they sit.
    assert summary.ops["matmul"] == 2
    assert summary.ops["elementwise"] == 1  # the tanh
    assert summary.fusions.get("kLoop", 0) >= 1
    assert summary.ops["fusion"] == sum(summary.fusions.values())
    assert summary.collectives == {} and summary.custom_calls == {}
    assert sum(summary.ops.values()) == summary.instructions
    assert set(summary.ops) <= set(OP_CATEGORIES) and 0 not in summary.ops.values()
    assert hlo.summarize(_forward(deeper_mlp)).ops["matmul"] == 3


def test_loops_count_as_control_flow() -> None:
    summary = hlo.summarize(_compiled(_scanned, jnp.ones((4, 8))))
    assert summary.ops["control-flow"] >= 1  # the while (XLA:CPU may wrap it in a call)
    assert summary.ops["reduce"] == 1  # the carry.sum(), inside the loop body


def test_collectives_appear_with_data_parallel_sharding_only() -> None:
    sharded = hlo.summarize(_gradient(mlp, True))
    # The batch is split, the weights are not: each device's weight gradient is summed over devices.
    assert set(sharded.collectives) == {"all-reduce"}
    assert sharded.ops["collective"] == sum(sharded.collectives.values())
    single = hlo.summarize(_gradient(mlp, False))
    assert single.collectives == {} and "collective" not in single.ops


def test_gpu_custom_calls_fusions_and_async_collectives() -> None:
    summary = hlo.summarize(GPU_HLO)
    assert summary.custom_calls == {"__cublas$lt$matmul": 2, "__cudnn$fmhaSoftmax": 1, "__triton": 1}
    # Each async pair is one collective, although both halves are instructions.
    assert summary.collectives == {"all-reduce": 1, "all-gather": 1, "collective-permute": 1}
    assert summary.fusions == {"kCustom": 1, "kInput": 1, "kLoop": 1}
    assert summary.instructions == 30
    assert summary.ops == {
        "matmul": 3,  # two cuBLAS custom calls and the dot inside the Triton gemm fusion
        "attention": 1,
        "collective": 6,
        "custom-call": 1,
        "fusion": 3,
        "elementwise": 2,  # the exponential and the reduction's add
        "reduce": 1,
        "copy": 1,
        "other": 12,  # 8 parameters, 1 constant, 3 get-tuple-element
    }


def test_normalize_keeps_backend_config_and_strings_as_written() -> None:
    normalized = hlo_text.normalize(GPU_HLO)
    assert '"name":"softmax}{, 100%done"' in normalized  # no rename inside strings, no split at their commas
    assert '"tuning_knobs":{"17":"1","24":"0"}' in normalized
    assert 'opaque="k\\"}{, %y"' in normalized  # an escaped quote does not end the string
    assert "/*index=2*/" not in normalized and "source_line" not in normalized
    assert "fingerprint_before_lhs" not in normalized and "_xla_stream_annotation" not in normalized
    assert "jit_train_step_0a1b2c" not in normalized and normalized.startswith("HloModule m, ")
    assert "num_partitions=2" in normalized and "entry_computation_layout=" in normalized
    # Names and metadata are not the program; a backend_config (here a cuDNN algorithm) is.
    renamed = GPU_HLO.replace("%custom-call.3", "%attention_call").replace("source_line=12", "source_line=99")
    assert hlo_text.fingerprint(renamed) == hlo_text.fingerprint(GPU_HLO)
    retuned = GPU_HLO.replace('"algo_id":"0"', '"algo_id":"7"')
    assert hlo_text.fingerprint(retuned) != hlo_text.fingerprint(GPU_HLO)


def test_diff_of_two_real_programs_lists_the_changed_counts() -> None:
    before, after = hlo.summarize(_forward(mlp)), hlo.summarize(_forward(deeper_mlp))
    changes = hlo.diff_summaries(before, after)
    assert CountChange("ops", "matmul", 2, 3) in changes
    for change in changes:
        assert getattr(before, change.section).get(change.name, 0) == change.before
        assert getattr(after, change.section).get(change.name, 0) == change.after
        assert change.before != change.after
    assert hlo.diff_summaries(before, hlo.summarize(_forward(renamed_mlp))) == []
    with_collectives = hlo.diff_summaries(
        hlo.summarize(_gradient(mlp, False)), hlo.summarize(_gradient(mlp, True))
    )
    assert CountChange("collectives", "all-reduce", 0, 1) in with_collectives


def test_diff_orders_sections_then_names_and_reads_absent_as_zero() -> None:
    def summary(**counts: dict[str, int]) -> ProgramSummary:
        empty: dict[str, dict[str, int]] = {"fusions": {}, "ops": {}, "collectives": {}, "custom_calls": {}}
        sections = empty | counts
        return ProgramSummary(fingerprint="0" * 64, instructions=0, **sections)

    a = summary(ops={"matmul": 2, "other": 1}, custom_calls={"__triton": 1}, fusions={"kLoop": 3})
    b = summary(ops={"other": 1, "copy": 2}, collectives={"all-reduce": 1}, fusions={"kLoop": 3, "kInput": 1})
    assert hlo.diff_summaries(a, b) == [
        CountChange("fusions", "kInput", 0, 1),
        CountChange("ops", "copy", 0, 2),
        CountChange("ops", "matmul", 2, 0),
        CountChange("collectives", "all-reduce", 0, 1),
        CountChange("custom_calls", "__triton", 1, 0),
    ]
    assert hlo.diff_summaries(a, a) == []


def test_text_that_is_not_hlo_is_refused() -> None:
    with pytest.raises(ValueError, match="no HLO computation"):
        hlo.summarize('FileNames\n1 "model.py"\n')
    with pytest.raises(ValueError, match="not an HLO instruction"):
        hlo_text.normalize("HloModule m\n\nENTRY %main () -> f32[] {\n  this is not an instruction\n}\n")
    with pytest.raises(ValueError, match="closing brace"):
        hlo_text.normalize("HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1)\n")
