"""What XLA compiled, counted: the summary of optimized HLO text (its fingerprint and the count of each
kind of instruction), the time category of each instruction a profile names, and the diff of two summaries.

Pure text processing: no JAX import. The text is what a compiled JAX program prints, read by hlo_text.py;
every computation is counted (fusions and loop bodies too), each instruction in exactly one of
OP_CATEGORIES, zero counts left out so equal programs compare equal. The categories: docs/design.md,
"Counting the compiled program".

    JAX_PLATFORMS=cpu python -c "import jax, jax.numpy as jnp; \\
        print(jax.jit(jnp.tanh).lower(jnp.ones(4)).compile().as_text())"
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

from jaxbench.core.schema import Strict
from jaxbench.harness.measure.hlo_text import Instruction, module_fingerprint, parse


class ProgramSummary(Strict):
    """What one compiled program is made of; summarize() builds it, diff_summaries() compares two."""

    fingerprint: str
    """sha256 hex of normalize(text)."""
    instructions: int
    """Instructions over all computations of the module."""
    fusions: dict[str, int]
    """Fusion instructions by kind as HLO writes it: kLoop, kInput, kOutput, kCustom."""
    ops: dict[str, int]
    """Instructions by category, one of OP_CATEGORIES each."""
    collectives: dict[str, int]
    """Collective operations by kind (all-reduce, all-gather, ...); an async X-start / X-done pair is one."""
    custom_calls: dict[str, int]
    """Custom calls by custom_call_target, as written."""


OP_CATEGORIES: tuple[str, ...] = (
    "matmul",
    "attention",
    "collective",
    "custom-call",
    "fusion",
    "elementwise",
    "reduce",
    "copy",
    "data-movement",
    "control-flow",
    "other",
)

COLLECTIVES = frozenset(
    {
        *("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all", "send", "recv"),
        *("collective-permute", "collective-broadcast"),
    }
)

ELEMENTWISE = frozenset(
    {
        *("abs", "add", "and", "atan2", "bitcast-convert", "cbrt", "ceil", "clamp", "clz", "compare"),
        *("complex", "convert", "cosine", "divide", "erf", "exponential", "exponential-minus-one"),
        *("floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "map", "maximum", "minimum"),
        *("multiply", "negate", "not", "or", "popcnt", "power", "real", "reduce-precision"),
        *("remainder", "round-nearest-afz", "round-nearest-even", "rsqrt", "select", "shift-left"),
        *("shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sqrt"),
        *("stochastic-convert", "subtract", "tan", "tanh", "xor"),
    }
)

DATA_MOVEMENT = frozenset(
    {
        *("bitcast", "broadcast", "concatenate", "dynamic-reshape", "dynamic-slice", "dynamic-update-slice"),
        *("gather", "pad", "reshape", "reverse", "scatter", "slice", "transpose"),
    }
)

_CATEGORY_OF_OPCODE: dict[str, str] = {
    **dict.fromkeys(("dot", "ragged-dot", "scaled-dot", "convolution"), "matmul"),
    "custom-call": "custom-call",
    "fusion": "fusion",
    **dict.fromkeys(ELEMENTWISE, "elementwise"),
    **dict.fromkeys(("reduce", "reduce-window", "select-and-scatter"), "reduce"),
    **dict.fromkeys(("copy", "copy-start", "copy-done"), "copy"),
    **dict.fromkeys(DATA_MOVEMENT, "data-movement"),
    **dict.fromkeys(
        ("while", "conditional", "call", "async-start", "async-update", "async-done"), "control-flow"
    ),
}

# Custom-call targets, matched case-blind. Attention first: cuDNN names both its attention (`__cudnn$fmha...`)
# and its convolution (`__cudnn$conv...`) kernels.
_ATTENTION_TARGET = re.compile(r"fmha|flash|attention", re.IGNORECASE)
_MATMUL_TARGET = re.compile(r"cublas|gemm|matmul|cudnn\$conv", re.IGNORECASE)


def _custom_call_target(instruction: Instruction) -> str:
    target = instruction.attribute("custom_call_target") or ""
    return target.strip('"')


def _category(instruction: Instruction) -> str:
    opcode = instruction.opcode
    if opcode == "custom-call":
        target = _custom_call_target(instruction)
        if _ATTENTION_TARGET.search(target):
            return "attention"
        if _MATMUL_TARGET.search(target):
            return "matmul"
        return "custom-call"
    if opcode in COLLECTIVES or _async_collective(opcode) is not None:
        return "collective"
    return _CATEGORY_OF_OPCODE.get(opcode, "other")


def _async_collective(opcode: str) -> str | None:
    """The collective an async half (X-start, X-done, send-done, recv-done) belongs to, else None."""
    for suffix in ("-start", "-done"):
        if opcode.endswith(suffix) and opcode.removesuffix(suffix) in COLLECTIVES:
            return opcode.removesuffix(suffix)
    return None


def summarize(text: str) -> ProgramSummary:
    """Counts of the program's instructions: by category, fusion kind, collective and custom-call target."""
    module = parse(text)
    instructions = [i for computation in module.computations for i in computation.instructions]
    fusions: Counter[str] = Counter()
    collectives: Counter[str] = Counter()
    custom_calls: Counter[str] = Counter()
    for instruction in instructions:
        if instruction.opcode == "fusion":
            fusions[instruction.attribute("kind") or "unknown"] += 1
        elif instruction.opcode == "custom-call":
            custom_calls[_custom_call_target(instruction)] += 1
        elif instruction.opcode in COLLECTIVES:
            collectives[instruction.opcode] += 1
        # The -done half of an async pair is not counted: the pair is one collective, started once.
        elif instruction.opcode.endswith("-start") and (kind := _async_collective(instruction.opcode)):
            collectives[kind] += 1
    ops = Counter(_category(instruction) for instruction in instructions)
    return ProgramSummary(
        fingerprint=module_fingerprint(module),
        instructions=len(instructions),
        fusions=dict(sorted(fusions.items())),
        ops={category: ops[category] for category in OP_CATEGORIES if ops[category]},
        collectives=dict(sorted(collectives.items())),
        custom_calls=dict(sorted(custom_calls.items())),
    )


TIME_CATEGORIES: tuple[str, ...] = (
    "matmul",
    "attention",
    "collectives",
    "elementwise fusions",
    "copies",
    "other",
)
"""What a profile's device time is spent on (harness/measure/profile.py); time outside every op is "host"."""
CONTAINER = "control-flow"
"""The time category of a while, conditional or call: its time is that of the ops it runs, which a profile
names too, so it is counted there and not again."""

_TIME_CATEGORY_OF: dict[str, str] = {
    "matmul": "matmul",
    "attention": "attention",
    "collective": "collectives",
    "copy": "copies",
    "fusion": "elementwise fusions",
    "elementwise": "elementwise fusions",
    "reduce": "elementwise fusions",
    "control-flow": CONTAINER,
}
_FUSION_PRECEDENCE = ("attention", "matmul", "collective")
"""A fusion's time goes to the costliest kind of work it fuses: a dot with its epilogue is matmul time."""


def time_categories(text: str) -> dict[str, str]:
    """The time category (TIME_CATEGORIES, or CONTAINER) of every instruction a profile can name: those
    outside fused computations, which a trace event names by `hlo_op`. A fusion takes its fused
    computation's costliest kind of work (_FUSION_PRECEDENCE), else it is an elementwise fusion (reductions
    included)."""
    module = parse(text)
    computations = {computation.name: computation for computation in module.computations}
    fused = {
        (instruction.attribute("calls") or "").lstrip("%")
        for computation in module.computations
        for instruction in computation.instructions
        if instruction.opcode == "fusion"
    }
    categories = {}
    for computation in module.computations:
        if computation.name in fused:
            continue
        for instruction in computation.instructions:
            category = _category(instruction)
            if instruction.opcode == "fusion":
                inner = computations.get((instruction.attribute("calls") or "").lstrip("%"))
                kinds = {_category(i) for i in inner.instructions} if inner else set()
                category = next((kind for kind in _FUSION_PRECEDENCE if kind in kinds), "fusion")
            categories[instruction.name] = _TIME_CATEGORY_OF.get(category, "other")
    return categories


@dataclasses.dataclass(frozen=True)
class CountChange:
    """One count that differs between two summaries."""

    section: str
    """The ProgramSummary field: fusions, ops, collectives or custom_calls."""
    name: str
    before: int
    after: int


_SECTIONS = ("fusions", "ops", "collectives", "custom_calls")


def diff_summaries(a: ProgramSummary, b: ProgramSummary) -> list[CountChange]:
    """Every count that differs between a and b (absent = 0): sections in ProgramSummary's field order
    (fusions, ops, collectives, custom_calls), names sorted; empty when the programs' summaries agree."""
    changes = []
    for section in _SECTIONS:
        before: dict[str, int] = getattr(a, section)
        after: dict[str, int] = getattr(b, section)
        for name in sorted(before.keys() | after.keys()):
            if before.get(name, 0) != after.get(name, 0):
                changes.append(CountChange(section, name, before.get(name, 0), after.get(name, 0)))
    return changes
