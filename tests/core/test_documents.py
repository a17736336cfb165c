"""Documents a user hands in (core/documents.py): every way their text can be wrong is one InvalidInput in one
line that names the source, whatever the parser raised; and the command line refuses '--' as a value on
every Python (jaxbench/main.py)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxbench.core.documents import MAX_ALIASED_NODES, MAX_DEPTH, check_document, parse_json, parse_yaml
from jaxbench.core.errors import InvalidInput
from jaxbench.main import double_dash_problem
from jaxbench.results.records import EARLIEST_NIGHT, night_problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * 20_000 + "]" * 20_000, "x.json: not valid JSON: nested too deeply"),
        ("[" + "1" * 5000 + "]", "x.json: not valid JSON: Exceeds the limit (4300 digits)"),
        ('{"a": "\\ud800"}', "x.json: the text '\\ud800' holds '\\ud800', a lone surrogate"),
        ('{"a\\udfff": 1}', "a lone surrogate"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels deep"),
        ('{"a": 1,}', "x.json: not valid JSON: Expecting property name enclosed in double quotes: line 1 "),
    ],
    ids=["stack-deep", "5000-digits", "lone-surrogate", "surrogate-key", "deeper-than-allowed", "syntax"],
)
def test_json_that_cannot_be_read_is_one_line_naming_the_file(text: str, expected: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_json(text, "x.json")
    assert expected in str(refused.value) and "\n" not in str(refused.value)


def test_json_bytes_that_are_not_utf8_name_the_byte() -> None:
    with pytest.raises(InvalidInput, match=r"x.json: not UTF-8 text: byte 0xff at byte offset 6"):
        parse_json(b'{"a": \xff}', "x.json")


def test_a_document_as_deep_as_allowed_is_read() -> None:
    depth = MAX_DEPTH - 1
    assert parse_json("[" * depth + "]" * depth, "x.json") is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("family: [vit\n", "x.yaml: not valid YAML: line 2, column 1: expected ',' or ']', but got"),
        ("default_size: 2026-13-45\n", "x.yaml: not valid YAML: month must be in 1..12"),
        ("base: " + "[" * 20_000, "x.yaml: not valid YAML: nested too deeply"),
        ('a: "\\ud800"\n', "a lone surrogate"),
        ("a: !!python/name:os.system\n", "x.yaml: not valid YAML: line 1, column 4: could not determine"),
        (
            "a: [1\nb: 2",
            "line 2, column 2: expected ',' or ']', but got ':' (while parsing a flow sequence at "
            "line 1, column 4)",
        ),
    ],
    ids=["unclosed", "month-13", "stack-deep", "lone-surrogate", "python-tag", "context"],
)
def test_yaml_that_cannot_be_read_is_one_line_naming_the_file(text: str, expected: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_yaml(text, "x.yaml")
    assert expected in str(refused.value) and "\n" not in str(refused.value)


def alias_levels(levels: int) -> str:
    """`levels` levels of ten aliases each to the level below: 10**levels copies of one element."""
    lines = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines)


def test_yaml_aliases_that_repeat_a_little_are_read() -> None:
    document = parse_yaml(alias_levels(3), "x.yaml")  # 10 + 100 copies: within MAX_ALIASED_NODES
    assert len(document["a2"]) == 10 and document["a2"][0] == [["x"]] * 10


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (alias_levels(9), f"aliases expand it by more than {MAX_ALIASED_NODES:,} nodes"),  # 10**9 copies
        (alias_levels(5), f"aliases expand it by more than {MAX_ALIASED_NODES:,} nodes"),  # 10**5 copies
        ("&a [1, *a]", "line 1, column 1: an alias names a collection it is inside of"),
        ("a: &a {b: *a}", "line 1, column 4: an alias names a collection it is inside of"),
        ("base: &a {x: 1}\nmore: {<<: [*a, *a, *a]}", None),
    ],
    ids=["10**9", "10**5", "list-in-itself", "mapping-in-itself", "merge-keys"],
)
def test_yaml_alias_bombs_are_refused_in_one_line_before_anything_reads_them(
    text: str, expected: str | None
) -> None:
    """A "billion laughs": every reader after the parser (a deep merge, pydantic, a message quoting the
    value) would walk each copy; 10**5 made a 358 KB error line, 10**8 a MemoryError."""
    if expected is None:
        assert parse_yaml(text, "x.yaml")["more"] == {"x": 1}
        return
    with pytest.raises(InvalidInput) as refused:
        parse_yaml(text, "x.yaml")
    message = str(refused.value)
    assert message.startswith("x.yaml: not valid YAML: ") and expected in message and len(message) < 200


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "vit", "--set=--"], "argument --set: expected a value, got '--'"),
        (["ingest", "x.json", "--night=--"], "argument --night: expected a value, got '--'"),
        (
            ["flags", "diff", "--", "--", "--"],
            "'--' ends the options once; expected a value in place of the second '--'",
        ),
        (["flags", "check", "--", "--xla_x=--"], None),
        (["flags", "diff", "--", "a", "b"], None),
        (["run", "vit", "--set=a=--"], None),
    ],
)
def test_two_dashes_as_a_value_are_refused_before_argparse_drops_them(
    argv: list[str], expected: str | None
) -> None:
    assert double_dash_problem(argv) == expected


def test_a_night_is_between_jax_and_a_year_from_today() -> None:
    today = dt.date(2026, 11, 25)
    assert night_problem(today, today) is None
    assert night_problem(dt.date(2027, 11, 25), today) is None  # a synthetic history dated ahead
    assert night_problem(EARLIEST_NIGHT, today) is None
    assert "more than a year after today (2026-11-25 UTC)" in str(night_problem(dt.date(2027, 11, 27), today))
    assert "more than a year after today" in str(night_problem(dt.date(9999, 12, 31), today))
    assert "before JAX existed" in str(night_problem(dt.date(1, 1, 1), today))


# Text with lone surrogates and the characters of a \\u escape in it, not only valid Unicode.
_texts = st.text(
    st.characters(codec=None, categories=["Cs", "Ll", "Nd"]) | st.sampled_from("\\u"), max_size=5
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | _texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=20,
)


@given(value=_json_values, form=st.sampled_from(["text", "escaped utf-8", "raw utf-8", "utf-16"]))
def test_skipping_the_text_walk_never_lets_a_lone_surrogate_through(value: object, form: str) -> None:
    """parse_json walks a document's strings only where its text can hold a lone surrogate (an escape, its
    own bytes, another encoding than UTF-8, or the character in text): it refuses exactly the documents the
    full walk refuses, whichever form the JSON comes in (json.loads reads bytes with "surrogatepass")."""
    escaped = json.dumps(value)  # ensure_ascii: every surrogate becomes a \\udXXX escape
    raw = json.dumps(value, ensure_ascii=False)
    data: str | bytes = {
        "text": raw,
        "escaped utf-8": escaped.encode(),
        "raw utf-8": raw.encode("utf-8", "surrogatepass"),
        "utf-16": raw.encode("utf-16", "surrogatepass"),
    }[form]
    # The full walk over what json reads from this very form: escaped, a surrogate pair becomes one
    # character (json joins \\ud800\\udc00), while as text or raw bytes it stays two lone surrogates.
    document = json.loads(data)
    try:
        check_document(document, "x.json")
    except InvalidInput:
        with pytest.raises(InvalidInput, match="lone surrogate"):
            parse_json(data, "x.json")
    else:
        assert parse_json(data, "x.json") == document


def test_a_surrogate_pair_as_text_is_refused_and_as_an_escape_is_one_character() -> None:
    pair = {"\ud800\udc00": None}
    with pytest.raises(InvalidInput, match="lone surrogate"):
        parse_json(json.dumps(pair, ensure_ascii=False), "x.json")
    assert parse_json(json.dumps(pair), "x.json") == {"\U00010000": None}
