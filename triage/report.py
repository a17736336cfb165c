"""A triage's outcome for people: the Markdown that goes into the summary file and onto the incident's
issue, and the JSON beside it. Pure: the outcome and the plan in, text out."""

from __future__ import annotations

import json

from jaxbench.core.markdown_escape import escape_markdown, markdown_code
from jaxbench.results.judgement.components import commit_url
from jaxbench.triage.logic import Verdict
from jaxbench.triage.session import Outcome
from jaxbench.triage.stacks import Plan

MARKER = "<!-- jaxbench-triage: {} -->"
"""Names the incident in the comment, so that a later triage of it can be told from a person's comment."""


def headline(plan: Plan, outcome: Outcome) -> str:
    if outcome.culprit:
        found = "speed-up from" if plan.faster else "culprit:"
        return f"{found} {outcome.component} {outcome.culprit[:12]}"
    if outcome.state == "finished" and outcome.reproduced is Verdict.GOOD:
        return "not reproduced"
    if outcome.state == "finished" and outcome.reproduced is Verdict.AMBIGUOUS:
        return "no culprit (reproduction ambiguous)"
    return f"no culprit ({outcome.state})"


def render_markdown(plan: Plan, outcome: Outcome) -> str:
    lines = [
        MARKER.format(plan.fingerprint),
        f"### jaxbench triage: {escape_markdown(headline(plan, outcome))}",
        "",
    ]
    if outcome.culprit and outcome.component and outcome.unit == "release":
        good, bad = markdown_code(outcome.last_good_commit or "?"), markdown_code(outcome.culprit)
        name = escape_markdown(outcome.component)
        lines.append(f"**{name} {bad}** is the first {plan.changed} release ({good} is {plan.unchanged}).")
        if outcome.release_range:
            span = escape_markdown(outcome.release_range)
            lines.append(
                f"- Commits between them: {span}; a source bisection of that range on a build runner (an "
                "image built per commit) names the commit"
            )
        if outcome.effect:
            lines.append(f"- Effect: {escape_markdown(outcome.effect)}")
    elif outcome.culprit and outcome.component:
        link = commit_url(outcome.repository, outcome.culprit)
        named = f"[`{outcome.culprit[:12]}`]({link})" if link else markdown_code(outcome.culprit)
        lines.append(f"**{escape_markdown(outcome.component)} {named}** is the first {plan.changed} commit.")
        if outcome.effect:
            lines.append(f"- Effect: {escape_markdown(outcome.effect)}")
        if outcome.program:
            lines.append(f"- Compiled program: {escape_markdown(outcome.program)}")
        if outcome.repository and not link:
            lines.append(f"- Repository: {markdown_code(outcome.repository)}")
    else:
        lines.append(escape_markdown(outcome.reason))
    lines += [
        "",
        f"- {'Change' if plan.faster else 'Incident'}: {plan.kind.value} on {markdown_code(plan.benchmark)}, "
        "fingerprint "
        f"{markdown_code(plan.fingerprint[:12])}",
        f"- Reproduction: {escape_markdown(outcome.reproduction or 'not run')}",
    ]
    if outcome.isolation:
        lines.append(f"- Component: {escape_markdown(outcome.isolation)}")
    if outcome.program_search:
        lines.append(f"- Compiled program between the ends: {escape_markdown(outcome.program_search)}")
    if plan.skipped:
        lines.append(f"- Moved too, not rerun here: {escape_markdown('; '.join(plan.skipped))}")
    if plan.carried:
        lines.append(f"- Moved with them: {escape_markdown('; '.join(plan.carried))}")
    if outcome.window and not outcome.culprit:
        lines.append(f"- Still possible: {', '.join(markdown_code(c[:12]) for c in outcome.window)}")
    lines.append(
        f"- Cost: {outcome.runs} benchmark runs, {outcome.seconds / 60:.1f} min of runs; "
        f"state {outcome.state}"
    )
    if outcome.probes:
        lines += [
            "",
            f"| {outcome.unit} | verdict | runs | median step (ms, {outcome.clock} clock) | final loss "
            "| note |",
            "|---|---|---|---|---|---|",
        ]
        for probe in outcome.probes:
            step = "" if probe.median_step_s is None else f"{probe.median_step_s * 1e3:.3f}"
            loss = "" if probe.final_loss is None else f"{probe.final_loss:.4f}"
            lines.append(
                f"| {markdown_code(probe.commit[:12])} | {probe.verdict.value} | {probe.runs} | {step} | "
                f"{loss} | {escape_markdown(probe.note)} |"
            )
    return "\n".join(lines) + "\n"


def render_json(plan: Plan, outcome: Outcome) -> str:
    return json.dumps(plan.as_json() | {"outcome": outcome.as_json()}, indent=2, default=str) + "\n"
