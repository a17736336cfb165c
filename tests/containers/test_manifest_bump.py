"""`jaxbench manifest bump` and `manifest diff`, offline against real git repositories made in tmp_path."""

from __future__ import annotations

import dataclasses
import io
import shutil
import stat
import string
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.containers.bump import Move, newest_release, pinned_commit, plan_bump
from jaxbench.containers.diff import manifest_diff, manifest_pins, read_manifest_source
from jaxbench.containers.git import GitRemote
from jaxbench.containers.manifest import TagRelease, load_manifest
from jaxbench.containers.manifest_commands import manifest_bump, manifest_diff_command
from jaxbench.core.errors import InvalidInput

XLA_PATTERN = 'XLA_COMMIT = "([0-9a-f]{40})"'
MANIFEST = string.Template("""\
# Test manifest: the comments must survive a bump.
schema_version: 1
components:
  xla:
    repository: $xla_repo
    ref: main
    commit: $xla_old   # xla head at the last bump
    install: source
    build: with-jax
    release:                  # the XLA inside jax's release
      pinned_by: jax
      file: third_party/xla/revision.bzl
      pattern: 'XLA_COMMIT = "([0-9a-f]{40})"'
      commit: null            # read by the next bump
  jax:
    repository: $jax_repo
    ref: $jax_ref
    commit: $v099   # jax head
    install: source
    pip: ["jax=={version}"]
    release:
      tags: v*
      tag: v0.9.9             # newest at the last bump
      commit: $v099
  lib:
    repository: $jax_repo
    ref: main
    commit: $v099
    install: wheel
    pip: ["lib=={version}"]
    release: {tags: lib-v1.*, prefix: lib-v, tag: lib-v1.2.0, commit: null}
  legacy:
    repository: $jax_repo
    ref: main
    commit: $v099
    install: wheel
    pip: ["legacy=={version}"]
    release:
      tags: v0.9.9            # stays on this tag
      prefix: v
      tag: v0.9.9
      commit: null
stages:
  base: {dockerfile: base.Dockerfile, components: [xla, jax, lib, legacy]}
flavors:
  cpu: {description: test, base_image: "debian:trixie", accelerator: cpu, python: "3.12", stages: [base]}
""")


CONFIG = ("user.name=t", "user.email=t@t", "commit.gpgSign=false", "tag.gpgSign=false")
IDENTITY = [arg for setting in CONFIG for arg in ("-c", setting)]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *IDENTITY, *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def new_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(path)], check=True)
    return path


def commit(repo: Path, message: str, files: dict[str, str] | None = None) -> str:
    for name, text in (files or {}).items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
        git(repo, "add", name)
    git(repo, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclasses.dataclass
class Upstream:
    jax: Path
    xla: Path
    xla_old: str
    xla_release: str
    xla_head: str
    v099: str
    """Also the jax head at the last bump."""
    v0100: str
    jax_head: str


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    xla = new_repo(tmp_path / "xla")
    xla_old, xla_mid = commit(xla, "x1"), commit(xla, "x2")
    xla_head = commit(xla, "x3")
    jax = new_repo(tmp_path / "jax")
    revision = "third_party/xla/revision.bzl"
    v099 = commit(jax, "one", {revision: f'XLA_COMMIT = "{xla_old}"\n'})
    git(jax, "tag", "v0.9.9")  # lightweight
    git(jax, "tag", "lib-v1.2.0")
    v0100 = commit(jax, "two", {revision: f'XLA_COMMIT = "{xla_mid}"\n'})
    git(jax, "tag", "-a", "-m", "release 0.10.0", "v0.10.0")
    git(jax, "tag", "-a", "-m", "lib 1.10.0", "lib-v1.10.0")
    git(jax, "tag", "lib-v2.0.0")  # outside the lib-v1.* glob
    commit(jax, "three", {revision: 'XLA_COMMIT = "not a commit"\n'})
    git(jax, "tag", "v1.0.0rc1")  # pre-release
    git(jax, "tag", "-a", "-m", "not a version", "vnext")
    git(jax, "tag", "v1.1.0.dev3")
    jax_head = commit(jax, "four")
    git(jax, "branch", "release-branch", v099)
    return Upstream(jax, xla, xla_old, xla_mid, xla_head, v099, v0100, jax_head)


def write_manifest(path: Path, up: Upstream, jax_ref: str = "main") -> Path:
    path.write_text(
        MANIFEST.substitute(
            xla_repo=up.xla, xla_old=up.xla_old, jax_repo=up.jax, jax_ref=jax_ref, v099=up.v099
        )
    )
    return path


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def moves_by_key(moves: list[Move]) -> dict[tuple[str, str], Move]:
    return {(m.component, m.field): m for m in moves}


def test_plan_bump_reads_heads_releases_and_pinned_commits(tmp_path: Path, upstream: Upstream) -> None:
    manifest = load_manifest(write_manifest(tmp_path / "manifest.yaml", upstream))
    moves = moves_by_key(plan_bump(manifest, GitRemote()))
    assert set(moves) == {(c, f) for c in ("xla", "jax", "lib", "legacy") for f in ("commit", "release")}
    assert moves["jax", "commit"] == Move("jax", "commit", upstream.v099, upstream.jax_head)
    assert moves["xla", "commit"].new == upstream.xla_head
    # v0.10.0 beats v0.9.9 and the peeled commit of the annotated tag is the pin, not the tag object
    assert moves["jax", "release"] == Move(
        "jax", "release", upstream.v099, upstream.v0100, "v0.9.9", "v0.10.0"
    )
    assert git(upstream.jax, "rev-parse", "v0.10.0") != upstream.v0100
    lib = moves["lib", "release"]
    assert (lib.new_tag, lib.new) == ("lib-v1.10.0", upstream.v0100)
    assert moves["legacy", "release"] == Move("legacy", "release", None, upstream.v099, "v0.9.9", "v0.9.9")
    # xla's release is read from revision.bzl in the tree of jax's new release tag
    assert moves["xla", "release"] == Move("xla", "release", None, upstream.xla_release)
    assert all(m.moved for m in moves.values())


def test_newest_release_by_pep440_skipping_prereleases_and_non_versions() -> None:
    release = TagRelease(tags="v*", tag="v0.9.9", commit=None)
    refs = {
        "refs/heads/main": "f" * 40,
        "refs/tags/v0.9.9": "1" * 40,
        "refs/tags/v0.10.0": "a" * 40,  # annotated: the tag object ...
        "refs/tags/v0.10.0^{}": "2" * 40,  # ... and the commit it points to
        "refs/tags/v1.0.0rc1": "3" * 40,
        "refs/tags/v1.1.0.dev1": "4" * 40,
        "refs/tags/vnext": "5" * 40,
        "refs/tags/x9.0.0": "6" * 40,
    }
    assert newest_release(refs, release) == ("v0.10.0", "2" * 40)
    peeled_first = {k: refs[k] for k in ("refs/tags/v0.10.0^{}", "refs/tags/v0.10.0", "refs/tags/v0.9.9")}
    assert newest_release(peeled_first, release) == ("v0.10.0", "2" * 40)
    assert newest_release({"refs/tags/v1.0.0rc1": "3" * 40, "refs/tags/vnext": "5" * 40}, release) is None
    prefixed = TagRelease(tags="lib-v1.*", prefix="lib-v", tag="lib-v1.2.0", commit=None)
    lib = {f"refs/tags/lib-v{v}": c * 40 for v, c in (("1.2.0", "1"), ("1.10.0", "2"), ("2.0.0", "3"))}
    assert newest_release(lib, prefixed) == ("lib-v1.10.0", "2" * 40)


def test_pinned_commit_needs_forty_hex() -> None:
    assert pinned_commit(f'XLA_COMMIT = "{"c" * 40}"', XLA_PATTERN, "f") == "c" * 40
    with pytest.raises(InvalidInput, match="revision.bzl at v1: no 40-hex commit"):
        pinned_commit('XLA_COMMIT = "abc"', XLA_PATTERN, "revision.bzl at v1")


def test_only_limits_the_moves(tmp_path: Path, upstream: Upstream) -> None:
    manifest = load_manifest(write_manifest(tmp_path / "manifest.yaml", upstream))
    assert {m.component for m in plan_bump(manifest, GitRemote(), ["jax"])} == {"jax"}
    # xla alone: its release is read at jax's tag as pinned now (v0.9.9), since jax does not move
    xla = moves_by_key(plan_bump(manifest, GitRemote(), ["xla"]))
    assert set(xla) == {("xla", "commit"), ("xla", "release")}
    assert xla["xla", "release"].new == upstream.xla_old
    with pytest.raises(InvalidInput, match=r"--only nope: expected components of the manifest \(jax, legacy"):
        plan_bump(manifest, GitRemote(), ["jax", "nope"])


def test_missing_branch_names_the_ref(tmp_path: Path, upstream: Upstream) -> None:
    manifest = load_manifest(write_manifest(tmp_path / "manifest.yaml", upstream, jax_ref="gone"))
    with pytest.raises(InvalidInput, match=r"components\.jax\.ref: no branch 'gone'"):
        plan_bump(manifest, GitRemote(), ["jax"])
    other = load_manifest(write_manifest(tmp_path / "other.yaml", upstream, jax_ref="release-branch"))
    assert plan_bump(other, GitRemote(), ["jax"])[0].new == upstream.v099


def test_bump_rewrites_the_manifest_keeping_comments(tmp_path: Path, upstream: Upstream) -> None:
    path = write_manifest(tmp_path / "manifest.yaml", upstream)
    before = path.read_text()
    out_console, out = console()
    assert manifest_bump([], path, False, out_console) == 0
    after = path.read_text()
    comments = [line.split("#", 1)[1] for line in before.splitlines() if "#" in line]
    assert len(comments) == 7 and all(f"#{c}" in after for c in comments)
    assert upstream.v099 not in after.split("\n  lib:")[0]  # jax's head and release both moved
    bumped = load_manifest(path)
    jax_release, xla_release = bumped.components["jax"].release, bumped.components["xla"].release
    assert isinstance(jax_release, TagRelease) and xla_release is not None
    jax_pins = (bumped.components["jax"].commit, jax_release.tag, jax_release.commit)
    assert jax_pins == (upstream.jax_head, "v0.10.0", upstream.v0100)
    assert xla_release.commit == upstream.xla_release
    assert bumped.components["xla"].commit == upstream.xla_head
    assert "bumped" in out.getvalue() and upstream.jax_head[:12] in out.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".yaml") == ["manifest.yaml"]
    again_console, again = console()
    assert manifest_bump([], path, False, again_console) == 0
    assert "every pin is at its newest already" in again.getvalue() and path.read_text() == after


def test_dry_run_leaves_the_file_byte_identical(tmp_path: Path, upstream: Upstream) -> None:
    path = write_manifest(tmp_path / "manifest.yaml", upstream)
    before = path.read_bytes()
    out_console, out = console()
    assert manifest_bump(["jax"], path, True, out_console) == 0
    assert path.read_bytes() == before
    assert "would bump" in out.getvalue() and "v0.10.0" in out.getvalue()


def test_bump_keeps_the_file_mode(tmp_path: Path, upstream: Upstream) -> None:
    path = write_manifest(tmp_path / "manifest.yaml", upstream)
    path.chmod(0o644)
    manifest_bump(["jax"], path, False, console()[0])
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_diff_command_lists_ranges_between_files(tmp_path: Path, upstream: Upstream) -> None:
    old = write_manifest(tmp_path / "old.yaml", upstream)
    new = tmp_path / "new.yaml"
    shutil.copy(old, new)
    manifest_bump([], new, False, console()[0])
    out_console, out = console()
    assert manifest_diff_command(str(old), str(new), tmp_path, out_console) == 0
    rows = {line.split("│")[1].strip(): line for line in out.getvalue().splitlines() if line.count("│") >= 4}
    assert upstream.v099[:12] in rows["jax"] and upstream.jax_head[:12] in rows["jax"]
    assert upstream.v099[:12] in rows["jax (release)"] and upstream.v0100[:12] in rows["jax (release)"]
    assert "unknown" in rows["xla (release)"]
    same_console, same = console()
    manifest_diff_command(str(old), str(old), tmp_path, same_console)
    assert "pin the same commits" in same.getvalue()


def test_manifest_diff_links_github_compare_pages() -> None:
    def manifest(head: str, release: str, version: str) -> dict[str, object]:
        jax_release = {"tags": "jax-v*", "tag": f"jax-v{version}", "commit": release}
        jax = {"repository": "https://github.com/jax-ml/jax.git", "commit": head, "release": jax_release}
        flax = {"repository": "https://github.com/google/flax", "commit": "f" * 40}
        return {"components": {"jax": jax, "flax": flax}}

    old, new = manifest("a" * 40, "b" * 40, "0.1.0"), manifest("c" * 40, "d" * 40, "0.2.0")
    assert manifest_pins(new)["jax (release)"] == ("https://github.com/jax-ml/jax.git", "d" * 40, "0.2.0")
    ranges = {r.name: r for r in manifest_diff(old, new)}
    assert set(ranges) == {"jax", "jax (release)"}  # flax did not move
    base = "https://github.com/jax-ml/jax/compare/"
    assert ranges["jax"].compare_url == f"{base}{'a' * 40}...{'c' * 40}"
    assert ranges["jax (release)"].compare_url == f"{base}{'b' * 40}...{'d' * 40}"
    local = {"components": {"x": {"repository": "/srv/mirror/x", "commit": "1" * 40}}}
    moved = {"components": {"x": {"repository": "/srv/mirror/x", "commit": "2" * 40}}}
    assert [(r.last_good, r.first_bad, r.compare_url) for r in manifest_diff(local, moved)] == [
        ("1" * 40, "2" * 40, None)
    ]


def test_manifest_diff_names_a_release_known_only_by_its_tag() -> None:
    def manifest(tag: str) -> dict[str, object]:
        release = {"tags": "v*", "tag": tag, "commit": None}
        return {
            "components": {
                "flax": {
                    "repository": "https://github.com/google/flax",
                    "commit": "f" * 40,
                    "release": release,
                }
            }
        }

    (change,) = manifest_diff(manifest("v0.12.12"), manifest("v0.12.13"))
    assert (change.name, change.last_good, change.first_bad) == ("flax (release)", "0.12.12", "0.12.13")


def test_read_manifest_source_from_a_git_revision(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "checkout")
    first = "components:\n  jax: {repository: https://github.com/jax-ml/jax, commit: " + "a" * 40 + "}\n"
    commit(repo, "first", {"containers/manifest.yaml": first})
    commit(repo, "second", {"containers/manifest.yaml": first.replace("a" * 40, "b" * 40)})
    assert read_manifest_source("HEAD~1", repo)["components"]["jax"]["commit"] == "a" * 40
    assert read_manifest_source("HEAD", repo)["components"]["jax"]["commit"] == "b" * 40
    on_disk = repo / "containers" / "manifest.yaml"
    assert read_manifest_source(str(on_disk), tmp_path)["components"]["jax"]["commit"] == "b" * 40
    out_console, out = console()
    manifest_diff_command("HEAD~1", "HEAD", repo, out_console)
    assert f"{'a' * 12}" in out.getvalue() and f"{'b' * 12}" in out.getvalue()
    assert "https://github.com/jax-ml/jax/compare/" in out.getvalue()
    with pytest.raises(InvalidInput, match="no-such-rev: neither a manifest file nor a git revision"):
        read_manifest_source("no-such-rev", repo)
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(InvalidInput, match="expected a manifest with a 'components' mapping"):
        read_manifest_source(str(tmp_path / "list.yaml"), repo)


def test_source_override_tracks_a_fork_branch_and_keeps_the_release(
    tmp_path: Path, upstream: Upstream
) -> None:
    fork = tmp_path / "jax-fork"
    git(tmp_path, "clone", "--quiet", str(upstream.jax), str(fork))
    git(fork, "checkout", "--quiet", "-b", "my-fix", upstream.v099)
    fork_head = commit(fork, "the fix")
    git(fork, "tag", "v9.0.0")  # a fork's tag must not become the release
    path = write_manifest(tmp_path / "manifest.yaml", upstream)
    assert manifest_bump(["xla"], path, False, console()[0], sources=[f"jax={fork}#my-fix"]) == 0
    bumped = load_manifest(path).components
    assert (bumped["jax"].repository, bumped["jax"].ref, bumped["jax"].commit) == (
        str(fork),
        "my-fix",
        fork_head,
    )
    release = bumped["jax"].release
    assert isinstance(release, TagRelease) and (release.tag, release.commit) == ("v0.9.9", upstream.v099)
    assert bumped["xla"].commit == upstream.xla_head  # --only still bumps the others it names
    assert bumped["lib"].commit == upstream.v099  # and nothing else


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jax", "expected COMPONENT=URL#REF"),
        ("jax=https://example.com/jax", "expected COMPONENT=URL#REF"),
        ("jax=#main", "expected COMPONENT=URL#REF"),
        ("nope=https://example.com/x#main", "no component 'nope' in the manifest"),
        ("jax=--upload-pack=evil#main", "may not contain spaces or start with '-'"),
    ],
)
def test_bad_source_override_is_named(tmp_path: Path, upstream: Upstream, text: str, message: str) -> None:
    path = write_manifest(tmp_path / "manifest.yaml", upstream)
    before = path.read_bytes()
    with pytest.raises(InvalidInput, match=f"--source '{text}': .*{message}"):
        manifest_bump([], path, False, console()[0], sources=[text])
    assert path.read_bytes() == before


def test_source_override_to_a_missing_branch_is_named(tmp_path: Path, upstream: Upstream) -> None:
    path = write_manifest(tmp_path / "manifest.yaml", upstream)
    with pytest.raises(InvalidInput, match=r"--source: no branch 'gone' in "):
        manifest_bump([], path, False, console()[0], sources=[f"jax={upstream.jax}#gone"])


def test_bump_to_out_leaves_the_source_alone(tmp_path: Path, upstream: Upstream) -> None:
    path = write_manifest(tmp_path / "manifest.yaml", upstream)
    before = path.read_bytes()
    out = tmp_path / "nightly" / "bumped.yaml"
    assert manifest_bump(["jax"], path, False, console()[0], out=out) == 0
    assert path.read_bytes() == before
    assert load_manifest(out).components["jax"].commit == upstream.jax_head
    # nothing moved: the nightly's next jobs still find a manifest at `out`
    again = tmp_path / "again.yaml"
    assert manifest_bump(["jax"], out, False, console()[0], out=again) == 0
    assert again.read_bytes() == out.read_bytes()
