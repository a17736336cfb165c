"""Optimized HLO text read into its computations and instructions (`parse`), and written back with only what
changes the program (`normalize`), whose sha256 is the program's name-blind `fingerprint`. Pure text
processing: no JAX import; hlo.py counts what `parse` reads.

`normalize` keeps what changes the program (opcodes, shapes and layouts, attributes, backend_config,
sharding, the wiring between instructions) and drops what only says where it came from: the module name,
`metadata={...}` (op_name, source_file, source_line, stack_frame_id), `frontend_attributes={...}`, the
FileNames / FunctionNames / FileLocations / StackFrames tables and `/*index=N*/` comments. Instruction,
computation and parameter names are renamed to numbers in order of first appearance, so the same program
traced from a renamed function or from other source lines normalizes to the same text, and `fingerprint` is
the sha256 of that text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable

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
class Instruction:
    """One instruction line, its pieces as written."""

    root: bool
    name: str
    shape: str
    opcode: str
    operands: str  # between the parentheses after the opcode
    attributes: tuple[tuple[str, str], ...]  # (key, value as written)

    def attribute(self, key: str) -> str | None:
        return next((value for k, value in self.attributes if k == key), None)


@dataclasses.dataclass(frozen=True)
class Computation:
    """One computation: its head line's pieces and its instructions in order."""

    entry: bool
    name: str
    parameters: tuple[tuple[str, str], ...]  # (name, shape)
    result: str  # after "->", before the opening brace
    instructions: tuple[Instruction, ...]


@dataclasses.dataclass(frozen=True)
class Module:
    """A whole HLO module as `parse` reads it."""

    attributes: tuple[str, ...]  # the header's "key=value" pieces after the module name
    computations: tuple[Computation, ...]


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


def _parse_instruction(line: str) -> Instruction:
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
    return Instruction(
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


def parse(text: str) -> Module:
    """The module's header attributes and computations; lines outside both (source tables) are skipped."""
    attributes: tuple[str, ...] = ()
    computations: list[Computation] = []
    head: tuple[bool, str, tuple[tuple[str, str], ...], str] | None = None
    body: list[Instruction] = []
    for raw in text.splitlines():
        line = _outside_strings(raw, lambda stretch: _COMMENT.sub("", stretch)).strip()
        if head is not None:  # inside a computation
            if line == "}":
                computations.append(Computation(*head, instructions=tuple(body)))
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
    return Module(attributes=attributes, computations=tuple(computations))


def normalize(text: str) -> str:
    """The HLO text with everything that does not change the program removed or made canonical.

    Removed: the module name, metadata={...}, frontend_attributes={...}, the source-location tables and
    comments. Instruction, computation and parameter names become numbers in order of first appearance
    (%fusion.123 -> %7), so that the same program traced from renamed functions or other source lines gives
    equal text. The result is HLO-shaped text that normalizes to itself.
    """
    return render(parse(text))


def render(module: Module) -> str:
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
    return module_fingerprint(parse(text))


def module_fingerprint(module: Module) -> str:
    """`fingerprint` of a module already parsed."""
    return hashlib.sha256(render(module).encode()).hexdigest()
