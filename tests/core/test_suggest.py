"""'Did you mean' (core/suggest.py): case first, then spelling, and nothing where nothing is close."""

from __future__ import annotations

from jaxbench.core.suggest import did_you_mean, nearest

SIZES = ["tiny", "1b", "7b", "13b", "70b"]


def test_a_name_in_another_case_is_the_one_meant() -> None:
    assert nearest("7B", SIZES) == "7b"
    assert nearest("TINY", SIZES) == "tiny"


def test_a_misspelling_gets_the_closest_name() -> None:
    assert nearest("llama", ["gpt3", "llama2", "vit"]) == "llama2"
    assert nearest("--sise", ["--size", "--steps", "--set"]) == "--size"


def test_nothing_close_suggests_nothing() -> None:
    assert nearest("resnet", ["gpt3", "llama2", "vit"]) is None
    assert did_you_mean("resnet", ["gpt3", "llama2", "vit"]) == ""
    assert did_you_mean("Vit", ["gpt3", "llama2", "vit"]) == " (did you mean 'vit'?)"
