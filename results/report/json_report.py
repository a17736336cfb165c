"""The report as a stable JSON document, for scripts and other tools (`jq`, dashboards elsewhere): the `data`
of `jaxbench report --json` (the same as `--format json`), in the envelope every `--json` prints
(core/json_output.py, whose `schema_version` covers these fields too).

    pytest tests/results/test_report_render.py -k json

Every field of the report model, under the same names; dates and times in ISO 8601; enums as their values;
keys sorted and lists in the report's order, so the same report always gives the same data. A `summary`
adds the counts that the Markdown headline shows, and each series its `name` as the other formats show it
("llama2-tiny · global_batch=16 (ad hoc)"): `key` ends in a hash.
"""

from __future__ import annotations

from jaxbench.core.json_output import Json, plain
from jaxbench.results.judgement.vocabulary import IncidentState, SeriesState
from jaxbench.results.report.formatting import series_name
from jaxbench.results.report.model import Report


def report_data(report: Report) -> dict[str, Json]:
    """The report's fields as JSON values, with each series' `name` and the `summary`; keys sorted."""
    document = plain(report)
    assert isinstance(document, dict)
    series = document["series"]
    assert isinstance(series, list)
    for view, shown in zip(report.series, series, strict=True):
        assert isinstance(shown, dict)
        shown["name"] = series_name(view)
    document["summary"] = {
        "series_by_state": {
            state.value: sum(s.state == state for s in report.series) for state in SeriesState
        },
        "open_incidents": sum(i.state == IncidentState.OPEN for i in report.incidents),
    }
    return _sorted(document)  # type: ignore[return-value]


def _sorted(value: Json) -> Json:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
