"""What moved between two runs: component commit ranges with compare links, XLA flag and environment
changes, and the compiled program. Pure functions; the manifest tooling uses the same range and link code.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from jaxbench.harness.measure.hlo import ProgramSummary, diff_summaries
from jaxbench.harness.measure.stablehlo import same_input
from jaxbench.results.judgement.vocabulary import ComponentRange, ProgramChange, SettingChange, TimeChange

ComponentPin = tuple[str | None, str | None, str | None]
"""(repository URL, commit, version)."""

_GITHUB = re.compile(r"^(?:https?://|git@)(?:www\.)?github\.com[:/](?P<path>[^/]+/[^/]+?)(?:\.git)?/?$")
_GITLAB = re.compile(r"^(?:https?://|git@)(?:www\.)?gitlab\.com[:/](?P<path>.+?)(?:\.git)?/?$")


def compare_url(repository: str | None, old: str | None, new: str | None) -> str | None:
    """A web page listing the commits old..new, for repositories hosted where such pages exist."""
    if not repository or not old or not new or old == new:
        return None
    if match := _GITHUB.match(repository):
        return f"https://github.com/{match['path']}/compare/{old}...{new}"
    if match := _GITLAB.match(repository):
        return f"https://gitlab.com/{match['path']}/-/compare/{old}...{new}"
    return None


def commit_url(repository: str | None, commit: str | None) -> str | None:
    """A web page of one commit, for repositories hosted where such pages exist."""
    if not repository or not commit:
        return None
    if match := _GITHUB.match(repository):
        return f"https://github.com/{match['path']}/commit/{commit}"
    if match := _GITLAB.match(repository):
        return f"https://gitlab.com/{match['path']}/-/commit/{commit}"
    return None


def component_ranges(
    before: Mapping[str, ComponentPin], after: Mapping[str, ComponentPin]
) -> list[ComponentRange]:
    """Per component whose commit or version differs, the last-good -> first-bad range (sorted by name)."""
    ranges = []
    for name in sorted(set(before) | set(after)):
        repo_before, commit_before, version_before = before.get(name, (None, None, None))
        repo_after, commit_after, version_after = after.get(name, (None, None, None))
        if (commit_before, version_before) == (commit_after, version_after):
            continue
        old = commit_before or version_before
        new = commit_after or version_after
        repository = repo_after or repo_before
        link = compare_url(repository, commit_before, commit_after)
        ranges.append(ComponentRange(name, repository, old, new, link))
    return ranges


def parse_xla_flags(text: str | None) -> dict[str, str]:
    """`--a=1 --b` -> {"--a": "1", "--b": "true"}; the last occurrence of a flag wins, as in XLA."""
    flags: dict[str, str] = {}
    try:
        tokens = shlex.split(text or "")
    except ValueError:  # stored as the run had it; an unbalanced quote must not stop the judgement
        tokens = (text or "").split()
    for token in tokens:
        name, sep, value = token.partition("=")
        flags[name] = value if sep else "true"
    return flags


def setting_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[SettingChange]:
    return [
        SettingChange(name, before.get(name), after.get(name))
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


def flag_and_env_changes(
    env_before: Mapping[str, str], env_after: Mapping[str, str]
) -> tuple[list[SettingChange], list[SettingChange]]:
    """XLA flag changes (flag by flag) and changes of the other recorded environment variables."""
    flags = setting_changes(
        parse_xla_flags(env_before.get("XLA_FLAGS")), parse_xla_flags(env_after.get("XLA_FLAGS"))
    )
    others_before = {k: v for k, v in env_before.items() if k != "XLA_FLAGS"}
    others_after = {k: v for k, v in env_after.items() if k != "XLA_FLAGS"}
    return flags, setting_changes(others_before, others_after)


def program_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> ProgramChange | None:
    """Whether two runs' stored programs (runs.program: summary and cost) are one program; None where either
    run recorded none, or one the summary model no longer reads."""
    if not before or not after:
        return None
    try:
        first, second = (
            ProgramSummary.model_validate(before["summary"]),
            ProgramSummary.model_validate(after["summary"]),
        )
    except (KeyError, TypeError, ValidationError):
        return None
    changes = tuple(
        f"{change.section} {change.name} {change.before} → {change.after}"
        for change in diff_summaries(first, second)
    )
    same = first.fingerprint == second.fingerprint
    flops = _flops(before), _flops(after)
    ratio = flops[1] / flops[0] if flops[0] and flops[1] and not same else None
    return ProgramChange(
        same_program=same,
        fingerprints=(first.fingerprint, second.fingerprint),
        changes=changes,
        flops_ratio=ratio,
        same_input=same_input(before.get("input_fingerprint"), after.get("input_fingerprint")),
    )


def _flops(program: Mapping[str, Any]) -> float | None:
    cost = program.get("cost")
    value = cost.get("flops") if isinstance(cost, Mapping) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def time_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> TimeChange | None:
    """Two stored profiles (runs.profile) side by side; None where either run has none with a breakdown."""
    first = _seconds(before)
    second = _seconds(after)
    if not first or not second:
        return None
    kinds = [*first, *(kind for kind in second if kind not in first)]
    return TimeChange(
        seconds_per_step=tuple((kind, first.get(kind, 0.0), second.get(kind, 0.0)) for kind in kinds)
    )


def _seconds(profile: Mapping[str, Any] | None) -> dict[str, float]:
    seconds = (profile or {}).get("seconds_per_step")
    if not isinstance(seconds, Mapping):
        return {}
    return {str(kind): float(value) for kind, value in seconds.items() if isinstance(value, int | float)}
