"""Text from the store and from users never acts in the Markdown jaxbench writes: no mention, cross-reference,
bare link, link, image or HTML in job summaries, the nightly's issues or its pull requests.

The Markdown is rendered (markdown-it, CommonMark with GFM tables), and what GitHub does after rendering is
checked on the rendered text: it links mentions, issue references and bare URLs found there.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_markdown_escape.py
"""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from jaxbench.containers.manifest import MANIFEST_PATH
from jaxbench.core.markdown_escape import ZERO_WIDTH_SPACE, escape_markdown, markdown_code
from jaxbench.nightly.land import Landing, _pull_request_body, change_summary
from jaxbench.results.alert_plan import issue_body
from jaxbench.results.judgement.vocabulary import ComponentRange, IncidentState
from jaxbench.results.report.github_markdown import render_markdown
from tests.support.sample_report import sample_report

# GitHub's filters, reduced to what starts them: "@name" not inside a word, "#123", "owner/repo#123", and
# the bare links and e-mail addresses of the GFM autolink extension.
_MENTION = re.compile(r"(?<![A-Za-z0-9_`])@[A-Za-z0-9]")
_REFERENCE = re.compile(r"#\d|(?i:\bgh-\d)")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Characters that reorder the text around them on the page: an issue title that reads backwards."""
_BARE_LINK = re.compile(r"(?i)\b(?:https?|ftp)://|\bwww\.|\w@\w")
_RENDERED_TAGS = {"table", "thead", "tbody", "tr", "th", "td", "p", "em", "strong", "code", "h1", "h2", "ul"}
_RENDERED_TAGS |= {"li", "details", "summary", "a"}

HOSTILE = [  # each shown as itself
    "@octocat",
    "cc @jax-ml/maintainers please",
    "fixed in jax-ml/jax#1234",
    "#12",
    "mail a@b.example",
    "https://evil.example/login",
    "www.evil.example",
    "![logo](https://evil.example/x.png)",
    "[click](https://evil.example)",
    "<img src=x onerror=alert(1)>",
    "<https://evil.example>",
    "<script>alert(1)</script>",
    "a|b",
    "a\\|b",
    "`code` and \\",
    "line\nbreak",
    "&#64;octocat",
    "fixed by GH-1234",
    "see gh-7 and Gh-8",
]


class _Rendered(HTMLParser):
    """Tags, link and image targets, the text outside code and the table cells' text, of rendered HTML."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.targets: list[str] = []
        self.text: list[str] = []
        self.cells: list[str] = []
        self._in_code = 0
        self._in_cell = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self._in_code += tag == "code"
        if tag in ("td", "th"):
            self.cells.append("")
            self._in_cell = True
        self.targets += [value or "" for name, value in attrs if name in ("href", "src")]

    def handle_endtag(self, tag: str) -> None:
        self._in_code -= tag == "code"
        self._in_cell = self._in_cell and tag not in ("td", "th")

    def handle_data(self, data: str) -> None:
        if not self._in_code:
            self.text.append(data)
        if self._in_cell:
            self.cells[-1] += data


def render(markdown: str) -> _Rendered:
    return _Rendered(MarkdownIt("commonmark").enable("table").render(markdown))


def what_github_would_act_on(markdown: str) -> list[str]:
    """Mentions, references and bare links GitHub would find, HTML that came through, and links or images
    that point at the hostile texts' host."""
    shown = render(markdown)
    text = "".join(shown.text)
    found = [
        m.group(0) for pattern in (_MENTION, _REFERENCE, _BARE_LINK, _BIDI) for m in pattern.finditer(text)
    ]
    found += sorted(shown.tags - _RENDERED_TAGS)
    return found + [target for target in shown.targets if "evil" in target]


def one_cell(text: str) -> str:
    return f"| header |\n|---|\n| {escape_markdown(text)} |\n"


def shown_in_the_cell(text: str) -> list[str]:
    """What a table whose one cell holds `text` shows, header first, without the zero-width spaces."""
    return [cell.replace(ZERO_WIDTH_SPACE, "") for cell in render(one_cell(text)).cells]


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_is_shown_as_itself_in_one_cell(text: str) -> None:
    assert what_github_would_act_on(one_cell(text)) == []
    assert shown_in_the_cell(text) == ["header", " ".join(text.split())]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab1 @#:/.w|[]()!<>&`\\\n;=-gGhH"), max_size=40))
def test_no_text_acts_or_leaves_its_cell(text: str) -> None:
    assert what_github_would_act_on(one_cell(text)) == []
    assert shown_in_the_cell(text) == ["header", " ".join(text.split())]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("evil\u202egnp.exe", "evil\\u202egnp.exe"),
        ("a\u2066b\u2069c", "a\\u2066b\\u2069c"),
        ("\u200fright-to-left mark", "\\u200fright-to-left mark"),
        ("colour\x1b[31m", "colour\\u001b[31m"),
    ],
)
def test_bidi_and_control_characters_are_shown_escaped(text: str, shown: str) -> None:
    assert what_github_would_act_on(one_cell(text)) == []
    assert shown_in_the_cell(text) == ["header", shown]
    assert _BIDI.search(markdown_code(text)) is None and "\x1b" not in markdown_code(text)


def _hostile_report() -> list[str]:
    """The sample report's names, hardware, summaries and components replaced by the hostile texts."""
    report = sample_report()
    series = [
        dataclasses.replace(s, benchmark=text, metric=text, hardware=text)
        for s, text in zip(report.series, HOSTILE, strict=False)
    ]
    incidents = [
        dataclasses.replace(
            incident,
            state=IncidentState.OPEN,
            hardware=text,
            summary=text,
            components=[
                ComponentRange(text, None, text, text, "https://github.com/jax-ml/jax/compare/a...b")
            ],
        )
        for incident, text in zip(report.incidents, HOSTILE, strict=False)
    ]
    hostile = dataclasses.replace(report, series=series, incidents=incidents, store="@octocat's store")
    return [render_markdown(hostile), *(issue_body(i) for i in incidents)]


def test_job_summary_and_issue_bodies_act_on_nothing() -> None:
    for markdown in _hostile_report():
        assert what_github_would_act_on(markdown) == []


def test_pull_request_body_acts_on_nothing() -> None:
    old = yaml.safe_load(MANIFEST_PATH.read_text())
    new = yaml.safe_load(MANIFEST_PATH.read_text())
    name = next(iter(new["components"]))
    new["components"]["@octocat <b>x</b>"] = new["components"].pop(name) | {"commit": "f" * 40}
    old["components"]["@octocat <b>x</b>"] = old["components"].pop(name)
    changes = change_summary(yaml.safe_dump(old), yaml.safe_dump(new))
    reason = "not every gating job passed (@octocat: failure, see www.evil.example)"
    body = _pull_request_body("2026-11-22", Landing(False, reason), changes, "javascript:alert(1)")
    assert what_github_would_act_on(body) == []
    assert "&lt;b&gt;" in body
