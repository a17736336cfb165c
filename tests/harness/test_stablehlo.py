"""The input fingerprint (harness/measure/stablehlo.py): the program JAX hands XLA, blind to names and source
locations, and how a changed optimized program is named with it (hlo-diff, incidents)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest

from jaxbench.harness.measure.stablehlo import (
    input_fingerprint,
    normalize_input,
    program_change_kind,
    same_input,
)
from jaxbench.results.judgement.components import program_change
from jaxbench.results.judgement.vocabulary import ProgramChange

ARGUMENT = jnp.ones((4, 8))


def lowered(function: Callable[..., Any], debug_info: bool = False) -> str:
    return str(jax.jit(function).lower(ARGUMENT).as_text(debug_info=debug_info))


def silu(x: jax.Array) -> jax.Array:
    return x * jax.nn.sigmoid(x)


def swish(x: jax.Array) -> jax.Array:  # silu by another name, on other source lines
    return x * jax.nn.sigmoid(x)


def with_silu(x: jax.Array) -> jax.Array:
    return jnp.sum(jax.jit(silu)(x) @ x.T)


def with_swish(x: jax.Array) -> jax.Array:
    return jnp.sum(jax.jit(swish)(x) @ x.T)


def with_tanh(x: jax.Array) -> jax.Array:
    return jnp.sum(jnp.tanh(x) @ x.T)


def test_names_and_locations_do_not_change_the_input_fingerprint() -> None:
    text = lowered(with_silu)
    assert "@silu" in text and "@jit_with_silu" in text  # what the normalization must see past
    renamed = lowered(with_swish)
    assert renamed != text
    assert input_fingerprint(renamed) == input_fingerprint(text)
    debug = lowered(with_silu, debug_info=True)
    assert "loc(" in debug
    assert normalize_input(debug) == normalize_input(text)


def test_another_operation_is_another_input_program() -> None:
    assert input_fingerprint(lowered(with_tanh)) != input_fingerprint(lowered(with_silu))
    other_shape = str(jax.jit(with_silu).lower(jnp.ones((4, 16))).as_text())
    assert input_fingerprint(other_shape) != input_fingerprint(lowered(with_silu))


def test_normalized_text_normalizes_to_itself() -> None:
    once = normalize_input(lowered(with_silu, debug_info=True))
    assert normalize_input(once) == once
    assert "@0" in once and "loc" not in once and "result_info" not in once


def test_text_that_is_not_a_lowered_program_is_refused() -> None:
    with pytest.raises(ValueError, match="not a lowered StableHLO module"):
        input_fingerprint("HloModule m\n\nENTRY %e () -> f32[] {\n}\n")


def test_same_input_needs_both_fingerprints() -> None:
    assert same_input("a", "a") is True
    assert same_input("a", "b") is False
    assert same_input(None, "a") is None and same_input("a", None) is None


@pytest.mark.parametrize(
    ("same", "named"),
    [
        (True, "same input program, compiled differently"),
        (False, "program changed, from its input"),
        (None, "program changed ("),
    ],
)
def test_an_incident_names_where_the_program_changed(same: bool | None, named: str) -> None:
    change = ProgramChange(same_program=False, fingerprints=("a" * 64, "b" * 64), same_input=same)
    assert change.describe().startswith(named)
    assert program_change_kind(same) in change.describe()


def stored(fingerprint: str, input_print: str | None) -> dict[str, Any]:
    """runs.program as the store keeps it (the result's Program without its HLO file)."""
    summary = {
        "fingerprint": fingerprint,
        "instructions": 3,
        "fusions": {},
        "ops": {"other": 3},
        "collectives": {},
        "custom_calls": {},
    }
    return {"summary": summary, "cost": {"flops": 10.0}, "input_fingerprint": input_print}


def test_the_store_s_programs_say_whether_the_input_changed() -> None:
    by_xla = program_change(stored("a" * 64, "i" * 64), stored("b" * 64, "i" * 64))
    assert by_xla is not None and by_xla.same_input is True
    by_jax = program_change(stored("a" * 64, "i" * 64), stored("b" * 64, "j" * 64))
    assert by_jax is not None and by_jax.same_input is False
    older = program_change(stored("a" * 64, None), stored("b" * 64, "j" * 64))
    assert older is not None and older.same_input is None
    same = program_change(stored("a" * 64, "i" * 64), stored("a" * 64, "i" * 64))
    assert same is not None and same.same_program and same.same_input is True
