"""How hard a triage tries: its bounds, in benchmark runs and minutes. Apart from the session so that the
command line reads the defaults without importing the statistics."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Settings:
    """How hard a triage tries before it gives up; every bound is a count of benchmark runs or minutes."""

    repeats: int = 5
    """Runs of each end per round of the reproduction: with the confidence shared among max_rounds=3 looks,
    5 a side is the fewest whose interval can close in the first round (logic.reproduce)."""
    max_rounds: int = 3
    probe_repeats: int = 4
    """Runs of a probed stack before it is classified; as many again while it stays ambiguous..."""
    max_probe_repeats: int = 8
    """... up to this many."""
    correctness_good_runs: int = 3
    """Runs of the last good stack that make a correctness band (results/judgement/correctness.py needs 3)."""
    max_probes: int = 12
    max_runs: int = 120
    max_minutes: float = 60.0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        for name in ("repeats", "max_rounds", "probe_repeats", "max_probes", "max_runs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: needs at least 1, got {getattr(self, name)}")
        if self.max_probe_repeats < self.probe_repeats:
            raise ValueError(
                f"max_probe_repeats ({self.max_probe_repeats}) is below probe_repeats ({self.probe_repeats})"
            )
        if self.correctness_good_runs < 3:
            raise ValueError(f"correctness_good_runs: a band needs 3 runs, got {self.correctness_good_runs}")
        if not self.max_minutes > 0:
            raise ValueError(f"max_minutes: must be positive, got {self.max_minutes}")


BOUNDS: dict[str, str] = {
    "max_runs": "benchmark runs at most, recorded ones included",
    "max_minutes": "minutes at most",
    "max_probes": "commits timed at most (and three times as many compile-only probes of the program)",
    "repeats": "runs of each end per round of the reproduction",
    "probe_repeats": "runs of a probed commit before it is classified (twice as many while ambiguous)",
}
"""The bounds a user sets on the command line, with their help."""
