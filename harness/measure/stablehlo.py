"""The fingerprint of a step's program as JAX hands it to XLA: the lowered StableHLO, before any XLA pass.

Pure text processing: no JAX import. Beside the optimized program's fingerprint (hlo_text.py), which XLA's
version, flags and GPU autotuning also change, this one says whether the Python side handed XLA the same
program. `normalize_input` drops what only says where the program came from (locations, the module's and
arguments' names) and numbers symbols in order, so a renamed function lowers to the same text. Why two
fingerprints: docs/design.md, "The input program's fingerprint".

    JAX_PLATFORMS=cpu python -c "import jax, jax.numpy as jnp; \\
        print(jax.jit(jnp.tanh).lower(jnp.ones(4)).as_text())"
"""

from __future__ import annotations

import hashlib
import re

_LOCATION_LINE = re.compile(r"^#loc\d*\s*=.*$", re.MULTILINE)
# loc(...) may nest one level: loc(callsite(#loc1 at #loc2)), loc("x"(#loc3)).
_LOCATION = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")
_NAME_ATTRIBUTE = re.compile(r'\s*jax\.(?:result_info|arg_info)\s*=\s*"(?:[^"\\]|\\.)*"\s*,?')
_EMPTY_ATTRIBUTES = re.compile(r"[ \t]*\{[ \t]*\}")
_SYMBOL = re.compile(r"@([\w.$\-]+)")
_MODULE_NAME = re.compile(r"^(\s*module)\s+@[\w.$\-]+", re.MULTILINE)


def normalize_input(text: str) -> str:
    """The lowered program's text without locations, names of results and arguments, and with symbols
    numbered in order of first appearance."""
    if "stablehlo." not in text and "func.func" not in text:
        raise ValueError("not a lowered StableHLO module: no func.func or stablehlo operation in the text")
    text = _LOCATION_LINE.sub("", text)
    text = _LOCATION.sub("", text)
    text = _NAME_ATTRIBUTE.sub("", text)
    text = _EMPTY_ATTRIBUTES.sub("", text)
    text = _MODULE_NAME.sub(r"\1", text)
    numbers: dict[str, str] = {}
    text = _SYMBOL.sub(lambda m: "@" + numbers.setdefault(m.group(1), str(len(numbers))), text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip()) + "\n"


def input_fingerprint(text: str) -> str:
    """sha256 hex of normalize_input(text): equal when JAX handed XLA the same program."""
    return hashlib.sha256(normalize_input(text).encode()).hexdigest()


def same_input(before: str | None, after: str | None) -> bool | None:
    """Whether two runs handed XLA the same program; None where either recorded no input fingerprint."""
    return None if before is None or after is None else before == after


def program_change_kind(same_input_program: bool | None) -> str:
    """How to name a change of the optimized program, given whether its input changed."""
    if same_input_program is True:
        return (
            "same input program, compiled differently (XLA's version or flags, or on a GPU its GEMM "
            "autotuning)"
        )
    if same_input_program is False:
        return "program changed, from its input (JAX, Flax, Optax or the model gave XLA another program)"
    return "program changed"
