"""A component repository given with a credential (`https://oauth2:TOKEN@github.com/...`): git gets it, and
nothing that is written or published does: not the manifest's records, a result file, the store, an
overlay's manifest, the bumped manifest, the dashboard, an issue, or an error line. A store that already
holds one is cleaned by migration 0010.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_url_credentials.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import insert, select

from jaxbench.containers import record
from jaxbench.containers.bump import apply_moves, parse_source_override, plan_bump
from jaxbench.containers.manifest import MANIFEST_PATH, load_manifest, parse_manifest
from jaxbench.containers.overlay import Pin, create_overlay, manifest_pins
from jaxbench.containers.resolve import resolve
from jaxbench.core.errors import InvalidInput
from jaxbench.harness.provenance.collection import MANIFEST_ENV, read_image_info
from jaxbench.main import main
from jaxbench.nightly.github import DirectoryRepository
from jaxbench.results import schema, store, synthetic
from jaxbench.results.alert_plan import LABEL
from jaxbench.results.ingest import parse_file
from jaxbench.results.judgement.detect import detect
from jaxbench.results.report.build import build_report
from jaxbench.results.report.html import write_dashboard
from tests.results.test_judgement import ingest_all, nightly

TOKEN = "s3cr3tT0ken"
OPTAX = "https://github.com/google-deepmind/optax"
WITH_TOKEN = f"https://oauth2:{TOKEN}@github.com/google-deepmind/optax"
JAX_WITH_TOKEN = f"https://x-access-token:{TOKEN}@github.com/jax-ml/jax?private_token={TOKEN}"


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def assert_no_token(*roots: Path) -> None:
    for root in roots:
        for path in files_under(root) if root.is_dir() else [root]:
            assert TOKEN.encode() not in path.read_bytes(), path


def manifest_with_token(tmp_path: Path) -> Path:
    data = yaml.safe_load(MANIFEST_PATH.read_text())
    data["components"]["optax"]["repository"] = WITH_TOKEN + ".git"
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(data))
    (tmp_path / "patches").symlink_to(MANIFEST_PATH.parent / "patches")
    return path


def test_the_manifest_keeps_the_credential_for_git_only(tmp_path: Path) -> None:
    manifest = load_manifest(manifest_with_token(tmp_path))
    optax = manifest.components["optax"]
    assert optax.repository == OPTAX + ".git" and optax.clone_url == WITH_TOKEN + ".git"
    assert TOKEN not in repr(optax) and TOKEN not in manifest.model_dump_json()
    resolved = resolve(manifest, "jax")  # what image plans and records are made of
    assert TOKEN not in resolved.model_dump_json()
    # The overlay of a typed manifest clones with the credential.
    assert manifest_pins(manifest.components, ["optax"], "m")["optax"].repository == WITH_TOKEN + ".git"


def test_stage_records_and_resolved_manifests_hold_no_credential() -> None:
    entry = {"repository": WITH_TOKEN, "ref": "main", "commit": "a" * 40, "install": "source", "patches": []}
    recorded = record.resolved_manifest({"kind": "image"}, [("jax", {"optax": entry})])
    assert recorded["components"]["optax"]["repository"] == OPTAX


class RecordingRemote:
    """A Remote that answers every branch with one commit and remembers the URLs it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def refs(self, repository: str, patterns: Sequence[str]) -> dict[str, str]:
        self.asked.append(repository)
        return {pattern: "c" * 40 for pattern in patterns if pattern.startswith("refs/heads/")}

    def read_file(self, repository: str, ref: str, path: str) -> str:
        raise AssertionError("not asked")


def test_a_source_override_asks_git_with_the_credential_and_writes_the_manifest_without(
    tmp_path: Path,
) -> None:
    manifest = load_manifest()
    source = parse_source_override(f"optax={WITH_TOKEN}#fix", manifest)
    assert source.repository == OPTAX and source.spec == f"{OPTAX}#fix" and TOKEN not in repr(source)
    remote = RecordingRemote()
    moves = plan_bump(manifest, remote, only=["optax"], sources=[source])
    assert remote.asked == [WITH_TOKEN]
    bumped = apply_moves(MANIFEST_PATH.read_text(), moves)
    assert TOKEN not in bumped and f"repository: {OPTAX}\n" in bumped
    assert TOKEN not in " ".join(f"{m.old} {m.new}" for m in moves)
    with pytest.raises(InvalidInput) as refused:
        parse_source_override(f"nosuch={WITH_TOKEN}#fix", manifest)
    assert TOKEN not in str(refused.value) and "nosuch" in str(refused.value)


def test_an_overlay_installs_with_the_credential_and_records_none(tmp_path: Path) -> None:
    asked: list[list[str]] = []

    def fake_pip(argv: list[str]) -> None:
        asked.append(argv)
        info = Path(argv[argv.index("--target") + 1]) / "optax-0.2.5.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: optax\nVersion: 0.2.5\n")

    base = {"kind": "virtualenv", "components": {"jax": {"repository": f"https://x:{TOKEN}@github.com/jax"}}}
    made = create_overlay(
        {"optax": Pin(WITH_TOKEN, "d" * 40)}, tmp_path / "overlay", base_manifest=base, run=fake_pip
    )
    assert asked[0][-1] == f"git+{WITH_TOKEN}@{'d' * 40}"
    assert TOKEN not in repr(made.pins["optax"])
    manifest = yaml.safe_load(made.manifest.read_text())
    assert manifest["components"]["optax"]["repository"] == OPTAX
    assert_no_token(made.path / "manifest.yaml", made.path / "pins.json")
    # What a run inside the overlay records (the base's entry, written by an older jaxbench, included).
    info = read_image_info({MANIFEST_ENV: str(made.manifest)})
    assert TOKEN not in json.dumps(info.manifest)


def test_nothing_published_from_the_result_on_holds_the_credential(tmp_path: Path) -> None:
    """36 nights whose manifest names jax with a token, a regression where jax moves: the result files'
    provenance, the store, the dashboard and the incident's issue hold no token, and git's words in an
    error line have it scrubbed."""

    def image_manifest(i: int) -> dict[str, Any]:
        manifest = synthetic.manifest(jax_commit=("2" if i >= 30 else "1") * 40)
        manifest["components"]["jax"]["repository"] = JAX_WITH_TOKEN
        return manifest

    paths = nightly(tmp_path, 36, lambda i: 0.5 * (1.15 if i >= 30 else 1.0), image_manifest=image_manifest)
    assert_no_token(*paths)  # the result's schema scrubs what the run read from its image
    for path in paths:  # as an older jaxbench, or a hand, wrote them
        document = json.loads(path.read_text())
        document["provenance"]["image"]["manifest"]["components"]["jax"]["repository"] = JAX_WITH_TOKEN
        path.write_text(json.dumps(document))
    parsed = parse_file(paths[0])
    assert {c.repository for c in parsed.components if c.name == "jax"} == {synthetic.JAX_REPO}
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    engine = ingest_all(url, paths)
    detection = detect(engine)
    report = build_report(detection, url)
    github = DirectoryRepository(tmp_path / "github")
    from jaxbench.nightly.alert_sync import sync_alerts

    sync_alerts(report, github, dashboard_url=None, dry_run=False)
    [issue] = github.list_issues(LABEL)
    assert "jax" in issue.body
    write_dashboard(report, tmp_path / "site")
    assert_no_token(tmp_path / "store.sqlite", tmp_path / "github", tmp_path / "site")
    engine.dispose()


def test_a_report_names_its_store_without_credentials(tmp_path: Path) -> None:
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    shown = build_report(detect(engine), "postgresql+psycopg://me:***@db.example/results?password=hunter2")
    assert shown.store == "postgresql+psycopg://db.example/results"
    engine.dispose()


def test_an_error_line_never_shows_a_credential(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["pr-check", "--base", "v1", "--source", f"nosuch={WITH_TOKEN}#fix"])
    assert code == 1
    err = capsys.readouterr().err
    assert "nosuch" in err and TOKEN not in err


def test_credentials_stored_before_are_scrubbed_by_the_migration(store_url: str, tmp_path: Path) -> None:
    """A store at 0008 holding a component repository, a job link and a triage reason with credentials:
    upgrading rewrites exactly those, and keeps the rest of each row."""
    engine = store.connect(store_url, migrate=False)
    store.upgrade(engine, "0008")
    run = parse_file(synthetic.write(tmp_path, synthetic.run_result(dt.date(2026, 11, 1), 0.5)))
    fields = {
        f.name: getattr(run, f.name)
        for f in dataclasses.fields(run)
        if f.name not in ("components", "results", "program", "profile")
    }
    fields["ci_job_url"] = "https://ci.example/job/7?access_token=abc123"
    fields["reason"] = f"git clone {WITH_TOKEN} failed"
    with engine.begin() as connection:
        run_id = connection.execute(
            insert(schema.Run.__table__).values(**fields, ingested_at=dt.datetime.now(dt.UTC))
        ).inserted_primary_key[0]
        connection.execute(
            insert(schema.Component.__table__),
            [
                {"run_id": run_id, "name": "optax", "repository": WITH_TOKEN, "commit": "a" * 40},
                {"run_id": run_id, "name": "jax", "repository": synthetic.JAX_REPO, "commit": "b" * 40},
            ],
        )
    store.upgrade(engine)
    with engine.connect() as connection:
        repositories = connection.execute(
            select(schema.Component.name, schema.Component.repository).order_by(schema.Component.name)
        ).all()
        job, reason = connection.execute(select(schema.Run.ci_job_url, schema.Run.reason)).one()
    assert [tuple(r) for r in repositories] == [("jax", synthetic.JAX_REPO), ("optax", OPTAX)]
    assert job == "https://ci.example/job/7" and reason == f"git clone {OPTAX} failed"
    engine.dispose()


def test_a_manifest_file_given_to_overlay_keeps_its_pins(tmp_path: Path) -> None:
    # parse_manifest is what `jaxbench overlay --manifest` reads: the typed component keeps its clone URL.
    data = yaml.safe_load(MANIFEST_PATH.read_text())
    data["components"]["flax"]["repository"] = f"https://{TOKEN}@github.com/google/flax"
    manifest = parse_manifest(data, "m.yaml")
    assert manifest.components["flax"].repository == "https://github.com/google/flax"
    assert manifest_pins(manifest.components, ["flax"], "m")["flax"].repository.endswith(
        f"{TOKEN}@github.com/google/flax"
    )
