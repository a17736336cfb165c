"""CPU lists as taskset takes them (`--cpus 1`, `0-3,6`): checked against the CPUs this process may run on
before any run starts, since taskset would fail every run otherwise."""

from __future__ import annotations

import os
import re
from collections.abc import Collection

from jaxbench.core.errors import InvalidInput

MAX_CPU = 10**6
"""Beyond any machine's CPU numbers: a longer number in --cpus is not converted, only refused."""
_CPU_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def cpu_list(text: str, available: Collection[int]) -> str:
    """`--cpus` as taskset's -c takes it (`1`, `0-3,6`), once every CPU it names is one this process may
    run on (taskset would fail every run otherwise); the same list back, written in ASCII digits."""
    return ranges(cpu_set(text, available))


def cpu_set(text: str, available: Collection[int]) -> set[int]:
    """The CPUs a taskset list names, each checked as `cpu_list` says."""
    expected = "expected a CPU list as taskset takes it, e.g. 1 or 0-3,6"
    spans = []
    for part in text.split(","):  # the whole list's form first, whichever CPUs this machine has
        match = _CPU_RANGE.fullmatch(part)
        if match is None:
            raise InvalidInput(f"--cpus {text!r}: {expected}")
        low, high = (_cpu_number(digits) for digits in (match[1], match[2] or match[1]))
        if low > high:
            raise InvalidInput(f"--cpus {text!r}: {part} runs backwards; {expected}")
        spans.append((low, high))
    chosen: set[int] = set()
    for low, high in spans:
        # Bounded before it is counted out: "0-99999999999" names no CPU list to build.
        beyond = [cpu for cpu in (low, high) if cpu > max(available, default=-1)]
        missing = beyond or sorted(set(range(low, high + 1)) - set(available))
        if missing:
            raise InvalidInput(
                f"--cpus {text!r}: CPU {missing[0]} is not one this process may run on "
                f"(it may use {ranges(available)})"
            )
        chosen.update(range(low, high + 1))
    return chosen


def ranges(cpus: Collection[int]) -> str:
    """`0-3,6`: CPUs as taskset lists them."""
    spans: list[list[int]] = []
    for cpu in sorted(cpus):
        if spans and cpu == spans[-1][1] + 1:
            spans[-1][1] = cpu
        else:
            spans.append([cpu, cpu])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in spans) or "none"


def _cpu_number(digits: str) -> int:
    """The number `digits` write, or one past any machine's CPUs where there are too many to convert."""
    return int(digits) if len(digits) <= len(str(MAX_CPU)) else MAX_CPU + 1


def this_process_cpus() -> Collection[int]:
    if hasattr(os, "sched_getaffinity"):
        return os.sched_getaffinity(0)
    return range(os.cpu_count() or 1)
