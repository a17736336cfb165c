"""What moved between two runs: component commit ranges with compare links, and XLA flag and environment
changes. Pure functions; the manifest tooling uses the same range and link code.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from results.judgement.vocabulary import ComponentRange, SettingChange

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
