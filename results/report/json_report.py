"""The report as a stable JSON document, for scripts and other tools (`jq`, dashboards elsewhere).

    pytest tests/results/test_report_render.py -k json

Every field of the report model, under the same names; dates and times in ISO 8601; enums as their values;
keys sorted and lists in the report's order, so the same report always gives the same bytes. A `summary`
adds the counts that the Markdown headline shows, and each series its `name` as the other formats show it
("llama2-tiny · global_batch=16 (ad hoc)"): `key` ends in a hash. `schema_version` changes when a field
changes meaning or disappears; added fields keep version 1.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math

from results.judgement.vocabulary import IncidentState, SeriesState
from results.report.formatting import series_name
from results.report.model import Report

SCHEMA_VERSION = 1

type Json = bool | int | float | str | list[Json] | dict[str, Json] | None


def render_json(report: Report) -> str:
    document = _plain(report)
    assert isinstance(document, dict)
    document["schema_version"] = SCHEMA_VERSION
    series = document["series"]
    assert isinstance(series, list)
    for view, plain in zip(report.series, series, strict=True):
        assert isinstance(plain, dict)
        plain["name"] = series_name(view)
    document["summary"] = {
        "series_by_state": {
            state.value: sum(s.state == state for s in report.series) for state in SeriesState
        },
        "open_incidents": sum(i.state == IncidentState.OPEN for i in report.incidents),
    }
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _plain(value: object) -> Json:
    """The report model as JSON values. A non-finite float becomes null (the model's "no valid value")."""
    match value:
        case None | bool() | int() | str() if not isinstance(value, enum.Enum):
            return value
        case enum.Enum():
            return _plain(value.value)
        case float():
            return value if math.isfinite(value) else None
        case dt.date():  # dt.datetime is a dt.date too; both have isoformat()
            return value.isoformat()
        case list() | tuple():
            return [_plain(item) for item in value]
        case dict():
            return {str(key): _plain(item) for key, item in value.items()}
        case _ if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    raise TypeError(f"cannot render {type(value).__name__} as JSON")
