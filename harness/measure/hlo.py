"""What XLA compiled: a name-blind fingerprint and a summary of optimized HLO text; the diff of two summaries.

Pure text processing: no JAX import. The text is what a compiled JAX program prints,

    JAX_PLATFORMS=cpu python -c "import jax, jax.numpy as jnp; \\
        print(jax.jit(jnp.tanh).lower(jnp.ones(4)).compile().as_text())"

`normalize` keeps what changes the program (opcodes, shapes and layouts, attributes, backend_config,
sharding, the wiring between instructions) and drops what only says where it came from: the module name,
`metadata={...}` (op_name, source_file, source_line, stack_frame_id), `frontend_attributes={...}`, the
FileNames / FunctionNames / FileLocations / StackFrames tables and `/*index=N*/` comments. Instruction,
computation and parameter names are renamed to numbers in order of first appearance, so the same program
traced from a renamed function or from other source lines normalizes to the same text, and `fingerprint` is
the sha256 of that text.

`summarize` counts instructions over every computation of the module: fused computations, reduction bodies and
loop bodies included, so a dot fused into a kCustom/kOutput fusion still counts as a matmul. Each instruction
falls into exactly one of OP_CATEGORIES, so the `ops` counts add up to `instructions`:

- matmul: dot, ragged-dot, scaled-dot, convolution, and custom calls to cuBLAS / gemm / cuDNN convolution
  targets (`__cublas$gemm`, `__cublas$lt$matmul`, `__cudnn$convForward`, ...): XLA:GPU lowers many dots
  to those.
- attention: custom calls whose target names a fused attention kernel (cuDNN `fmha`, flash attention).
- collective: the cross-device operations of COLLECTIVES, both halves of an async pair (`all-reduce-start` and
  `all-reduce-done` are two instructions; `collectives` counts the pair once, as `all-reduce`).
- custom-call: every other custom call (`__triton`, host callbacks, ...).
- fusion: fusion instructions; the instructions of their fused computations count in their own categories.
- elementwise: the arithmetic, logic, comparison and conversion ops of ELEMENTWISE.
- reduce: reduce, reduce-window, select-and-scatter (the gradient of a windowed reduction).
- copy: copy, copy-start, copy-done: layout changes and host/device transfers that cost memory bandwidth.
- data-movement: ops of DATA_MOVEMENT, which only move or reshape data: transpose, reshape, broadcast, ...
- control-flow: while, conditional, call, and the generic async-start / async-update / async-done wrappers,
  which call a computation the way `call` does (the operation they wrap counts in that computation).
- other: the rest: parameter, constant, tuple, get-tuple-element, iota, rng, sort, partition-id, ...

A count that would be zero is left out of the dicts, so two summaries of the same program compare equal.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable

from core.schema import Strict


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

_DROPPED_ATTRIBUTES = frozenset({"metadata", "frontend_attributes"})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SPECIAL = re.compile(r'["()\[\]{},]')
_OPENERS, _CLOSERS = "([{", ")]}"
_COMMENT = re.compile(r"/\*.*?\*/")
_REFERENCE = re.compile(r"%([\w.\-]+)")
_INSTRUCTION_HEAD = re.compile(r"(ROOT\s+)?%?([\w.\-]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([\w\-]+)\(")
_COMPUTATION_HEAD = re.compile(r"(ENTRY\s+)?%?([\w.\-]+)\s*(?=\()")
_ARROW = re.compile(r"\s*->\s*(.*?)\s*\{$")


@dataclasses.dataclass(frozen=True)
class _Instruction:
    root: bool
    name: str
    shape: str
    opcode: str
    operands: str  # between the parentheses after the opcode
    attributes: tuple[tuple[str, str], ...]  # (key, value as written)

    def attribute(self, key: str) -> str | None:
        return next((value for k, value in self.attributes if k == key), None)


@dataclasses.dataclass(frozen=True)
class _Computation:
    entry: bool
    name: str
    parameters: tuple[tuple[str, str], ...]  # (name, shape)
    result: str  # after "->", before the opening brace
    instructions: tuple[_Instruction, ...]


@dataclasses.dataclass(frozen=True)
class _Module:
    attributes: tuple[str, ...]  # the header's "key=value" pieces after the module name
    computations: tuple[_Computation, ...]


def _scan(text: str, start: int) -> Iterable[tuple[int, str, int]]:
    """(index, character, depth before it) of each bracket and comma from start on, strings skipped."""
    depth, position = 0, start
    while match := _SPECIAL.search(text, position):
        char, position = match.group(), match.end()
        if char == '"':
            quoted = _STRING.match(text, match.start())
            # An unterminated string runs to the end of the line.
            position = quoted.end() if quoted else len(text)
            continue
        yield match.start(), char, depth
        depth += (char in _OPENERS) - (char in _CLOSERS)


def _group_end(text: str, start: int) -> int:
    """Index just past the bracket closing the one at text[start]."""
    for index, char, depth in _scan(text, start):
        if char in _CLOSERS and depth == 1:
            return index + 1
    raise ValueError(f"unbalanced brackets in HLO: {text[start:]!r}")


def _split_top_level(text: str) -> list[str]:
    """text cut at the commas outside brackets and strings, each piece stripped; no empty pieces."""
    pieces, start = [], 0
    for index, char, depth in _scan(text, 0):
        if char == "," and depth == 0:
            pieces.append(text[start:index])
            start = index + 1
    pieces.append(text[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def _outside_strings(text: str, change: Callable[[str], str]) -> str:
    """text with change applied to every stretch outside double-quoted strings."""
    pieces, position = [], 0
    for quoted in _STRING.finditer(text):
        pieces += [change(text[position : quoted.start()]), quoted.group()]
        position = quoted.end()
    return "".join([*pieces, change(text[position:])])


def _parse_instruction(line: str) -> _Instruction:
    head = _INSTRUCTION_HEAD.match(line)
    if head is None:
        raise ValueError(f"not an HLO instruction: {line!r}")
    position = head.end()
    # A tuple shape, (f32[2]{0}, s32[]), holds spaces; an array shape, f32[2,3]{1,0}, none.
    tuple_shape = line.startswith("(", position)
    shape_end = _group_end(line, position) if tuple_shape else line.find(" ", position)
    opcode = _OPCODE.match(line, shape_end) if shape_end > position else None
    if opcode is None:
        raise ValueError(f"no shape and opcode in HLO instruction: {line!r}")
    operands_end = _group_end(line, opcode.end() - 1)
    attributes = []
    for piece in _split_top_level(line[operands_end:]):
        key, _, value = piece.partition("=")
        attributes.append((key.strip(), value.strip()))
    return _Instruction(
        root=head.group(1) is not None,
        name=head.group(2),
        shape=line[position:shape_end].strip(),
        opcode=opcode.group(1),
        operands=line[opcode.end() : operands_end - 1].strip(),
        attributes=tuple(attributes),
    )


def _parse_computation_head(line: str) -> tuple[bool, str, tuple[tuple[str, str], ...], str] | None:
    """(entry, name, parameters, result) of a computation's first line, or None where the line is not one."""
    head = _COMPUTATION_HEAD.match(line)
    if head is None or not line.endswith("{"):
        return None
    parameters_end = _group_end(line, head.end())
    arrow = _ARROW.match(line, parameters_end)
    if arrow is None:
        return None
    parameters = []
    for piece in _split_top_level(line[head.end() + 1 : parameters_end - 1]):
        name, _, shape = piece.partition(":")
        parameters.append((name.strip().lstrip("%"), shape.strip()))
    return head.group(1) is not None, head.group(2), tuple(parameters), arrow.group(1)


def _parse(text: str) -> _Module:
    """The module's header attributes and computations; lines outside both (source tables) are skipped."""
    attributes: tuple[str, ...] = ()
    computations: list[_Computation] = []
    head: tuple[bool, str, tuple[tuple[str, str], ...], str] | None = None
    body: list[_Instruction] = []
    for raw in text.splitlines():
        line = _outside_strings(raw, lambda stretch: _COMMENT.sub("", stretch)).strip()
        if head is not None:  # inside a computation
            if line == "}":
                computations.append(_Computation(*head, instructions=tuple(body)))
                head, body = None, []
            elif line:
                body.append(_parse_instruction(line))
        elif line.startswith("HloModule "):
            attributes = tuple(_split_top_level(line.removeprefix("HloModule "))[1:])
        else:
            head = _parse_computation_head(line)
    if head is not None:
        raise ValueError(f"HLO computation {head[1]} has no closing brace")
    if not computations:
        raise ValueError("no HLO computation found in the text")
    return _Module(attributes=attributes, computations=tuple(computations))


def normalize(text: str) -> str:
    """The HLO text with everything that does not change the program removed or made canonical.

    Removed: the module name, metadata={...}, frontend_attributes={...}, the source-location tables and
    comments. Instruction, computation and parameter names become numbers in order of first appearance
    (%fusion.123 -> %7), so that the same program traced from renamed functions or other source lines gives
    equal text. The result is HLO-shaped text that normalizes to itself.
    """
    return _render(_parse(text))


def _render(module: _Module) -> str:
    """normalize's text of a parsed module."""
    numbers: dict[str, str] = {}

    def number(name: str) -> str:
        return numbers.setdefault(name, str(len(numbers)))

    def renamed(fragment: str) -> str:
        return _outside_strings(fragment, lambda s: _REFERENCE.sub(lambda m: "%" + number(m.group(1)), s))

    kept = [a for a in module.attributes if a.partition("=")[0].strip() not in _DROPPED_ATTRIBUTES]
    lines = [", ".join(["HloModule m", *map(renamed, kept)])]
    for computation in module.computations:
        name = ("ENTRY " if computation.entry else "") + "%" + number(computation.name)
        parameters = ", ".join(f"{number(p)}: {renamed(shape)}" for p, shape in computation.parameters)
        lines += ["", f"{name} ({parameters}) -> {renamed(computation.result)} {{"]
        for instruction in computation.instructions:
            attributes = "".join(
                f", {key}={renamed(value)}" if value else f", {renamed(key)}"
                for key, value in instruction.attributes
                if key not in _DROPPED_ATTRIBUTES
            )
            root = "ROOT " if instruction.root else ""
            lines.append(
                f"  {root}%{number(instruction.name)} = {renamed(instruction.shape)}"
                f" {instruction.opcode}({renamed(instruction.operands)}){attributes}"
            )
        lines.append("}")
    return "\n".join(lines) + "\n"


def fingerprint(text: str) -> str:
    """sha256 hex of normalize(text): equal for the same program whatever its names and source lines."""
    return _sha256(normalize(text))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _custom_call_target(instruction: _Instruction) -> str:
    target = instruction.attribute("custom_call_target") or ""
    return target.strip('"')


def _category(instruction: _Instruction) -> str:
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
    module = _parse(text)
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
        fingerprint=_sha256(_render(module)),
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
    module = _parse(text)
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
