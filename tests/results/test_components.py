"""Component ranges, compare links and flag differences between a last good and a first bad run."""

from __future__ import annotations

import pytest

from jaxbench.results.judgement.components import (
    compare_url,
    component_ranges,
    flag_and_env_changes,
    parse_xla_flags,
)
from jaxbench.results.judgement.vocabulary import ComponentRange, SettingChange


@pytest.mark.parametrize(
    ("repository", "expected"),
    [
        ("https://github.com/openxla/xla", "https://github.com/openxla/xla/compare/aaa...bbb"),
        ("https://github.com/openxla/xla.git", "https://github.com/openxla/xla/compare/aaa...bbb"),
        ("git@github.com:openxla/xla.git", "https://github.com/openxla/xla/compare/aaa...bbb"),
        ("https://gitlab.com/group/sub/proj.git", "https://gitlab.com/group/sub/proj/-/compare/aaa...bbb"),
        ("https://example.org/git/xla", None),
        (None, None),
    ],
)
def test_compare_links(repository: str | None, expected: str | None) -> None:
    assert compare_url(repository, "aaa", "bbb") == expected


def test_no_link_without_two_different_commits() -> None:
    assert compare_url("https://github.com/a/b", "aaa", "aaa") is None
    assert compare_url("https://github.com/a/b", None, "bbb") is None


def test_only_moved_components_are_listed() -> None:
    before = {
        "jax": ("https://github.com/jax-ml/jax", "111", "0.12.0"),
        "flax": (None, None, "0.12.11"),
        "numpy": (None, None, "2.5.5"),
    }
    after = {
        "jax": ("https://github.com/jax-ml/jax", "222", "0.12.0"),
        "flax": (None, None, "0.12.12"),
        "numpy": (None, None, "2.5.5"),
        "transformer-engine": (None, None, "2.9"),
    }
    assert component_ranges(before, after) == [
        ComponentRange("flax", None, "0.12.11", "0.12.12", None),
        ComponentRange(
            "jax",
            "https://github.com/jax-ml/jax",
            "111",
            "222",
            "https://github.com/jax-ml/jax/compare/111...222",
        ),
        ComponentRange("transformer-engine", None, None, "2.9", None),
    ]


def test_xla_flags_are_compared_flag_by_flag() -> None:
    assert parse_xla_flags("--a=1 --b --a=2 --c='x y'") == {"--a": "2", "--b": "true", "--c": "x y"}
    # A stored XLA_FLAGS with an unbalanced quote is still compared, flag by flag, not an error.
    assert parse_xla_flags("--a=1 --d='x") == {"--a": "1", "--d": "'x"}
    flags, env = flag_and_env_changes(
        {"XLA_FLAGS": "--a=1 --b=2", "NCCL_PROTO": "LL128", "JAX_PLATFORMS": "cuda"},
        {"XLA_FLAGS": "--b=2 --c=3", "NCCL_PROTO": "Simple", "JAX_PLATFORMS": "cuda"},
    )
    assert flags == [SettingChange("--a", "1", None), SettingChange("--c", None, "3")]
    assert env == [SettingChange("NCCL_PROTO", "LL128", "Simple")]
