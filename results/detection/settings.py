"""Every default of regression detection, in one place, each with its reason.

The figures behind the screen's thresholds come from `benchmarks/detection_quality.py` (synthetic nightly
series with injected steps, transients, heavy-tailed slow nights and drift), which prints whether the targets
are met with these values:

    .venv/bin/python benchmarks/detection_quality.py
"""

from __future__ import annotations

import dataclasses

MAD_TO_SIGMA = 1.4826
"""MAD x 1.4826 estimates the standard deviation of normal data (1 / Phi^-1(3/4))."""


@dataclasses.dataclass(frozen=True)
class LevelAgreement:
    """When a few nights hold one level rather than scatter (`results.detection.levels.holds_a_level`): the
    screen's windows, a transient's block and a short segment must; two or three unrelated slow nights
    close together do not (+8 % and +25 % on a series of 1 % noise)."""

    max_spread: float = 4.5
    """The nights agree within 4.5 sigma (max - min): a shifted level does (three normal nights spread
    wider 0.5 % of the time, five 2 %), two unrelated slow nights of +8 % and +25 % do not."""

    max_spread_of_shift: float = 0.25
    """... or within a quarter of the shift their median night makes: a quiet series (1 % noise) whose step
    moved +56 % and +62 % on two nights has moved, though 5 sigma lie between them (a slower step varies
    more); +8 % and +25 % (a quarter of +16 % is 4 %) still do not agree."""


@dataclasses.dataclass(frozen=True)
class ChangePointSettings:
    """The retrospective pass over a whole history (`jaxbench.results.detection.edivisive`)."""

    window_len: int = 50
    """Nights per sliding window of the split step (Otava's default): long enough for a t-test to see a
    2-3 % step at 1 % noise, short enough that an older change does not mask a newer one; windows overlap
    by half."""

    split_pvalue: float = 1e-4
    """Relaxed level of the split step: 10x max_pvalue, as Hunter/Otava do. Weak candidates are cheap, the
    merge step removes those that do not hold up on the final segments (Fleming et al. 2023, sec. 3)."""

    max_pvalue: float = 1e-5
    """Level a change point must reach between its merged neighbouring segments (Student's t-test). Hunter's
    default, 1e-3, ignores that the split chose the best of many places: of 200 year-long pure-noise series
    (3 % noise) 20 % got a spurious change point at 1e-3, 2.5 % at 1e-4, none at 1e-5, while 3 % steps at
    1 % noise were found as often (97.5 %) and 5-night regressions more exactly (96 % vs 85 %)."""

    min_magnitude: float = 0.01
    """Smallest relative change reported (|mean_after / mean_before - 1|). Below 1 % a GPU benchmark's change
    is not actionable, and ultra-stable series would otherwise report significant 0.1 % wiggles."""

    min_points_after: int = 3
    """A change needs this many nights after it before it is reported: the newest nights are the screen's
    job, and one or two slow nights at the end must not become a change point. Unless the evidence
    carries a shorter level (short_segment_z)."""

    short_segment_z: float = 10.0
    """A level of two nights (fewer than min_points_after) is a segment of its own when it moved this many
    noise widths from the one before and its nights hold one level (`agreement`): a microbenchmark at
    0.05 % noise that dropped 3 % for two nights moved 60 of them, which no pair of ordinary nights does;
    one night is never a level (it is a spike). Spared by the despiking as well."""

    young_segment_nights: int = 5
    """A segment up to this long must hold one level (`agreement`) to count: three nights at the end of a
    series of which two are slow nights and one is not are no new level. Three ordinary nights spread
    beyond the agreement 0.5 % of the time, five 2 %: a real change so young is then found a night or two
    later."""

    agreement: LevelAgreement = LevelAgreement()
    """How closely the nights of a short or young level agree."""

    spike_neighbours: int = 5
    """Nights on each side that define "normal" around a possible spike (fewer near the ends; the first and
    last night are judged against one side). Three is the smallest number whose median ignores one other
    odd night nearby."""

    spike_threshold: float = 5.0
    """A night is a spike when it is this many standard deviations of the series' night-to-night noise
    (1.4826 x median |first difference| / sqrt(2), which steps and spikes hardly move) from the medians of
    both its sides, on the same side. Five leaves ordinary noise nights alone."""

    spike_floor: float = 0.001
    """Relative floor on that noise (0.1 % of the neighbours' median), so that on a constant series a
    rounding-level difference does not count as a spike."""


@dataclasses.dataclass(frozen=True)
class EpisodeSettings:
    """Transients and drifts (`results.detection.episodes`): findings over a stretch of nights that the
    retrospective pass would otherwise cut into change points."""

    transient_max_nights: int = 7
    """Longest block that counts as a transient (a week of nightlies); longer ones are a step and its
    recovery, each with its own change point."""

    transient_context: int = 7
    """Nights on each side whose medians are the level a transient left and came back to (at least 4)."""

    transient_z: float = 6.0
    """z of the block's mean against the level around it. A year of nights holds about 2,000 candidate
    blocks; 6 keeps pure noise from ever forming one, while a 5 % transient of 3 nights at 1 % noise has a
    z near 8."""

    transient_min_change: float = 0.02
    """Smallest practical size of a transient (relative to the level around it)."""

    transient_agreement: float = 0.5
    """Every night of the block moved by at least this share of the block's shift, i.e. lies nearer the
    block's level than the level around it: a transient moves each of its nights by about as much, while
    two unrelated slow nights (5 % and 25 %) do not form one, and a block does not stretch over a normal
    night next to it."""

    outlier_z: float = 4.0
    """A night within transient_context of a block that moved the same way on its own, this many noise
    widths beyond the level around (and beyond transient_agreement of the block's shift), makes the block
    one of a cluster of outliers: slow nights that come one by one and scatter, not a level that left and
    came back. Four noise widths: an ordinary night is there once in 30,000."""

    recurring_nights: int = 3
    """A block is one of the series' modes, not a transient, when this many nights elsewhere moved as it
    did from their own neighbourhood (the same way, beyond outlier_z, about as far): a benchmark whose runs
    land on a slower kind of runner now and then comes back to that one level again and again."""

    agreement: LevelAgreement = LevelAgreement()
    """A block's nights must hold one level (max - min within it): two or three slow nights close together
    scatter, each slowed on its own, and are outliers, not a transient."""

    drift_max_degree: int = 8
    """Highest degree of the smooth trend (Legendre polynomials over the series, the degree picked by BIC):
    a line, or up to about two cycles of a slow oscillation, but never a sharp step."""

    drift_pvalue: float = 1e-5
    """Level of the F-test of the trend, given the steps kept (the same level as a change point's)."""

    drift_min_change: float = 0.015
    """Smallest range of the trend (relative) that is reported as a drift."""

    drift_min_nights: int = 20
    """Nights a series needs before a drift is looked for."""

    drift_guard_nights: int = 5
    """Newest nights left out of the trend's fit: a fresh step at the end is the screen's, and a polynomial
    would bend to it."""


@dataclasses.dataclass(frozen=True)
class ScreenSettings:
    """The nightly screen of the newest night(s) (`results.detection.screen`). Thresholds were tuned with
    benchmarks/detection_quality.py; the figures quoted are its output in its first form (120-night series
    at four noise levels, before the drift and transient classes; today's: docs/measurements.md,
    "Detection quality and speed")."""

    baseline_nights: int = 90
    """Nights of the current segment whose median is the baseline. A 3-night window's z has variance
    1/3 + (pi/2)/n (sigma^2): with n = 20 the median's own noise is 19 % of it, and even with the noise level
    known exactly, catching 95 % of 3 % steps at 1 % noise within 3 nights cost 0.11 false alarms per 100
    series-nights (simulation); with 90 it is 5 %. Change points still cut the baseline at a change."""

    drift_baseline_nights: int = 20
    """Under a drift, the baseline is the trend of this many newest nights (a line by Theil-Sen) carried to
    the night judged: short enough that a slow cycle is nearly straight over it."""

    trend_confidence: float = 0.8
    """Confidence of the Theil-Sen slope's interval over the baseline's nights: where it excludes zero the
    level may be moving (a drift the episodes have not named, or not yet), and a window must also be beyond
    that line carried on to it, or it is the drift's next step. Only a veto, so a loose 80 % costs little:
    over 90 nights the line's extrapolation adds 4 % to the median's variance. Nightly false alarms on the
    quality benchmark's 600 drift series (23,824 judged nights): 33 with the level alone, 18 with this
    reference at 99 %, 17 at 80 %, with the same recall."""
    recent_nights: int = 12
    """A window must also be beyond the median of the 12 nights just before it: a step leaves them at the
    old level, while a cycle turning or a drift speeding up has already carried them part of the way. With
    it the drift series' false alarms went from 17 to 14 (7 nights cost more recall for no fewer); 11 once
    the retrospective pass no longer cut short drifts into steps (episodes._steps_not_a_line)."""
    recent_relief: float = 1.0
    """That veto's statistical thresholds are window_z less 1 (its median, of only 12 nights, is noisy):
    the screen alone then catches 166 of 200 seeded 3 % steps at 1 % noise by their third night (174
    without the veto; 146 with it at the full threshold), and the nightly replay's recall is unchanged."""
    scale_nights: int = 120
    """Nights whose night-to-night differences give the noise scale (differences ignore level shifts, so
    they may cross change points). n differences carry about n / 1.6 degrees of freedom, and the thresholds
    are t quantiles: more nights, lower thresholds for the same false-alarm rate."""

    min_history: int = 10
    """Fewest baseline nights to judge at all; with fewer, z rests on too little (the t correction and the
    median's variance already demand more from a short history)."""

    noise_floor: float = 0.005
    """Relative floor on the scale (0.5 % of the median): ultra-stable series must not alarm on 0.1 %
    wiggles, and a run-to-run spread below 0.5 % is not something the screen can resolve."""

    min_change: float = 0.015
    """Practical threshold: a window's mean must differ from the baseline median by at least 1.5 %
    (relative) for any verdict but ok. At 2 % the mean of three nights of a 3 % step at 1 % noise falls short
    in 5 % of series; smaller changes are left to the retrospective pass (min_magnitude 1 %)."""

    window_z: tuple[float, ...] = (4.0, 4.0, 3.3)
    """Normal-equivalent z thresholds for the mean of the newest k = 1, 2, 3 nights against the baseline
    median (turned into t quantiles for the scale's degrees of freedom). One night needs 4 (suspected).
    Three nights carry the 3-night target: at 1 % noise a 3 % step gives z ~ 5, and 3.3 is where false
    alarms (~Phi(-3.3) per night) stay under 0.05 per 100 at every noise level (0.044 at 3 % noise); 3.2
    catches 93 % of those steps within 3 nights instead of 91 % but gives 0.053. Two nights need 4: a
    lower threshold there added false alarms as fast as detections."""

    night_z: tuple[float, ...] = (2.5, 0.0)
    """For windows of k = 2, 3 nights: each night must also be beyond night_z[k-2] on its own (on the
    window's side), so that one very slow night cannot carry the window."""

    night_cap: float = 1.0
    """In the mean of a window of two or more, a night counts at most 1 sigma beyond the window's median
    night: a 3 % step barely notices (its nights scatter by sigma), a window carried by one slow night of
    +5 % next to two ordinary ones no longer passes. Cut slow-night false alarms by a third."""

    agreement: LevelAgreement = LevelAgreement()
    """How closely the nights of a window of two or more must agree to be one shifted level: a flaky
    regression that fails this stays suspected until the retrospective pass finds it."""

    max_resolvable: float = 0.10
    """A series whose longest window can only confirm changes above 10 % is too noisy to judge: said with
    its noise, not "ok". At the three-night threshold that is a night-to-night noise of about 4.7 %; the
    quality benchmark's noisiest ordinary series (3 %) resolve 6-7 %."""

    def __post_init__(self) -> None:
        if not self.window_z or len(self.night_z) != len(self.window_z) - 1:
            raise ValueError(
                f"night_z needs one threshold per window of two or more nights: {len(self.window_z)} windows "
                f"(window_z) need {max(len(self.window_z) - 1, 0)}, got {len(self.night_z)}"
            )
        if self.min_history < 2:
            raise ValueError(f"min_history must be at least 2 for a MAD, got {self.min_history}")


@dataclasses.dataclass(frozen=True)
class DetectionSettings:
    detectors: tuple[str, ...] = ("e-divisive", "screen")
    """The detectors that judge a series, by registry name (results/detection/detectors.py), in the order
    they run: each sees what the ones before it found, so the screen comes after the change points that
    cut its baseline."""
    change_points: ChangePointSettings = ChangePointSettings()
    episodes: EpisodeSettings = EpisodeSettings()
    screen: ScreenSettings = ScreenSettings()


DEFAULT_SETTINGS = DetectionSettings()
