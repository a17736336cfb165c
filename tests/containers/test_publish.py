"""Publishing nightly images per architecture (containers/publish.py, `jaxbench push` and `publish`).

The plan and the docker commands run against fakes; tests/containers/test_publish_registry.py pushes and
publishes for real against a registry from scripts/start-registry.
"""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Sequence

import pytest
from rich.console import Console

from jaxbench import main as cli
from jaxbench.containers import docker, image_commands
from jaxbench.containers.publish import arch_tag, known_arch, normalise_arch, parse_arches, plan_publish
from jaxbench.core.errors import ExitCode, ExternalFailure, InvalidInput

LOCAL = "localhost:5000/jaxbench"
DATE = "2026-11-22"


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=300), out


# The plan.


def test_every_arch_present_publishes_dated_and_undated() -> None:
    plan = plan_publish("ghcr.io/jaxbench", "cpu", DATE, ["amd64", "arm64"], ["arm64", "amd64"])
    assert plan.dated == "ghcr.io/jaxbench/jax:cpu-2026-11-22"
    assert plan.undated == "ghcr.io/jaxbench/jax:cpu"
    assert plan.sources == (
        "ghcr.io/jaxbench/jax:cpu-2026-11-22-amd64",
        "ghcr.io/jaxbench/jax:cpu-2026-11-22-arm64",
    )
    assert plan.move_undated is True
    assert plan.missing == ()


def test_one_arch_missing_publishes_the_others_dated_only() -> None:
    plan = plan_publish("ghcr.io/jaxbench", "jax", DATE, ["amd64", "arm64"], ["amd64"])
    assert plan.sources == ("ghcr.io/jaxbench/jax:jax-2026-11-22-amd64",)
    assert plan.move_undated is False
    assert plan.missing == ("arm64",)


def test_no_arch_present_publishes_nothing() -> None:
    plan = plan_publish("ghcr.io/jaxbench", "cpu", DATE, ["amd64", "arm64"], [])
    assert plan.sources == ()
    assert plan.move_undated is False
    assert plan.missing == ("amd64", "arm64")


def test_present_but_not_requested_stays_out() -> None:
    plan = plan_publish("ghcr.io/jaxbench", "cpu", DATE, ["amd64"], ["amd64", "arm64"])
    assert plan.sources == ("ghcr.io/jaxbench/jax:cpu-2026-11-22-amd64",)
    assert plan.move_undated is True


@pytest.mark.parametrize(
    ("name", "arch"),
    [("amd64", "amd64"), ("x86_64", "amd64"), ("X86_64", "amd64"), ("aarch64", "arm64"), ("arm64", "arm64")],
)
def test_arch_names_normalise(name: str, arch: str) -> None:
    assert known_arch(name) == arch
    assert normalise_arch(name, "ARCHES") == arch


def test_unknown_arch_is_none_or_an_error_naming_where_it_came_from() -> None:
    assert known_arch("ppc64le") is None
    with pytest.raises(InvalidInput, match=r"this engine 'ppc64le': expected one of amd64, arm64"):
        normalise_arch("ppc64le", "this engine")


def test_arches_parse_in_order_once_each() -> None:
    assert parse_arches(["x86_64,aarch64"]) == ("amd64", "arm64")
    assert parse_arches(["arm64", "amd64 x86_64"]) == ("arm64", "amd64")


@pytest.mark.parametrize("items", [["amd64,riscv64"], [""], [], [" , "]])
def test_bad_arches_name_the_flag_and_the_allowed_values(items: list[str]) -> None:
    with pytest.raises(InvalidInput, match=r"ARCHES/--arches.*amd64, arm64"):
        parse_arches(items)


def test_arch_tag() -> None:
    assert arch_tag("ghcr.io/jaxbench", "cpu", DATE, "aarch64") == "ghcr.io/jaxbench/jax:cpu-2026-11-22-arm64"


@pytest.mark.parametrize(
    ("registry", "date", "expected"),
    [("ghcr.io/jaxbench", "2026-02-30", "DATE"), ("GHCR.io/Bad Org", DATE, "REGISTRY")],
)
def test_bad_plan_input(registry: str, date: str, expected: str) -> None:
    with pytest.raises(InvalidInput, match=expected):
        plan_publish(registry, "cpu", date, ["amd64"], [])


# The docker adapter, against a fake runner.


class FakeDocker:
    """Answers docker commands like an engine with local images and a registry of tags (tag → arch)."""

    def __init__(
        self,
        engine_arch: str | None = "amd64",
        local: dict[str, str] | None = None,
        remote: dict[str, str] | None = None,
        failing: Sequence[str] = (),
    ) -> None:
        self.engine_arch = engine_arch
        self.local = dict(local or {})
        self.remote = dict(remote or {})
        self.failing = failing  # commands ("docker manifest push", ...) that fail
        self.calls: list[tuple[list[str], bool]] = []

    def __call__(self, argv: Sequence[str], *, capture: bool) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        self.calls.append((argv, capture))
        command = " ".join(argv[:3])
        if any(command.startswith(f) for f in self.failing):
            return subprocess.CompletedProcess(argv, 1, "", "denied: permission_denied: write_package\n")
        match argv[1:3]:
            case ["version", _]:
                return self._answer(argv, self.engine_arch)
            case ["image", "inspect"]:
                return self._answer(argv, self.local.get(argv[-1]))
            case ["tag", _]:
                self.local[argv[3]] = self.local[argv[2]]
            case ["push", _]:
                self.remote[argv[2]] = self.local[argv[2]]
            case ["manifest", "inspect"]:
                arch = self.remote.get(argv[-1])
                if arch is None:
                    return subprocess.CompletedProcess(argv, 1, "", f"no such manifest: {argv[-1]}\n")
                found = {"Ref": argv[-1], "Descriptor": {"platform": {"architecture": arch, "os": "linux"}}}
                return subprocess.CompletedProcess(argv, 0, json.dumps(found), "")
            case ["manifest", "push"]:
                return subprocess.CompletedProcess(argv, 0, "sha256:" + "ab" * 32 + "\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    @staticmethod
    def _answer(argv: list[str], value: str | None) -> subprocess.CompletedProcess[str]:
        if value is None:
            return subprocess.CompletedProcess(argv, 1, "", "Error: No such object\n")
        return subprocess.CompletedProcess(argv, 0, value + "\n", "")

    def argvs(self) -> list[list[str]]:
        return [argv for argv, _ in self.calls]


@pytest.mark.parametrize(
    ("reference", "flag"),
    [
        ("localhost:5000/jaxbench/jax:cpu", ["--insecure"]),
        ("localhost/jax:cpu", ["--insecure"]),
        ("127.0.0.1:5000/jax:cpu", ["--insecure"]),
        ("127.1.2.3:5000/jax:cpu", ["--insecure"]),
        ("[::1]:5000/jax:cpu", ["--insecure"]),
        ("ghcr.io/jaxbench/jax:cpu", []),
        ("localhost.example.com:5000/jax:cpu", []),
        ("10.0.0.1:5000/jax:cpu", []),
    ],
)
def test_insecure_only_for_registries_on_this_machine(reference: str, flag: list[str]) -> None:
    assert docker.insecure(reference) == flag


@pytest.mark.parametrize(
    ("registry", "flag"), [("localhost:5000/jaxbench", ["--insecure"]), ("ghcr.io/jaxbench", [])]
)
def test_remote_architecture_commands(registry: str, flag: list[str]) -> None:
    fake = FakeDocker(remote={f"{registry}/jax:cpu-{DATE}-amd64": "amd64"})
    client = docker.DockerCli(run=fake)
    assert client.remote_architecture(f"{registry}/jax:cpu-{DATE}-amd64") == "amd64"
    assert client.remote_architecture(f"{registry}/jax:cpu-{DATE}-arm64") is None
    assert fake.argvs() == [
        ["docker", "manifest", "inspect", *flag, "--verbose", f"{registry}/jax:cpu-{DATE}-amd64"],
        ["docker", "manifest", "inspect", *flag, "--verbose", f"{registry}/jax:cpu-{DATE}-arm64"],
    ]


def test_remote_architecture_other_errors_and_lists_fail() -> None:
    def untrusted(argv: Sequence[str], *, capture: bool) -> subprocess.CompletedProcess[str]:
        error = "failed to configure transport: x509: certificate signed by unknown authority\n"
        return subprocess.CompletedProcess(argv, 1, "", error)

    # (a transient error is retried first: tests/containers/test_registry_retries.py)
    with pytest.raises(docker.DockerFailed, match="x509: certificate signed by unknown authority"):
        docker.DockerCli(run=untrusted).remote_architecture(f"{LOCAL}/jax:cpu-{DATE}-amd64")

    def a_list(argv: Sequence[str], *, capture: bool) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, json.dumps([{"Ref": "x"}, {"Ref": "y"}]), "")

    with pytest.raises(docker.DockerFailed, match="multi-platform list"):
        docker.DockerCli(run=a_list).remote_architecture(f"{LOCAL}/jax:cpu-{DATE}-amd64")


@pytest.mark.parametrize(
    ("registry", "flag"), [("localhost:5000/jaxbench", ["--insecure"]), ("ghcr.io/jaxbench", [])]
)
def test_push_list_commands(registry: str, flag: list[str]) -> None:
    fake = FakeDocker()
    target, sources = f"{registry}/jax:cpu-{DATE}", [f"{registry}/jax:cpu-{DATE}-amd64"]
    assert docker.DockerCli(run=fake).push_list(target, sources) == "sha256:" + "ab" * 32
    assert fake.argvs() == [
        ["docker", "manifest", "rm", target],
        ["docker", "manifest", "create", *flag, target, *sources],
        ["docker", "manifest", "push", *flag, "--purge", target],
    ]


def test_push_list_failure_names_the_command() -> None:
    fake = FakeDocker(failing=["docker manifest push"])
    with pytest.raises(
        docker.DockerFailed, match=r"docker manifest push --insecure --purge .*permission_denied"
    ):
        docker.DockerCli(run=fake).push_list(f"{LOCAL}/jax:cpu", [f"{LOCAL}/jax:cpu-{DATE}-amd64"])


# `jaxbench push`.


def test_push_tags_and_pushes_this_engines_arch() -> None:
    dated = f"{LOCAL}/jax:cpu-{DATE}"
    fake = FakeDocker(engine_arch="x86_64", local={dated: "amd64"})
    console, out = _console()
    code = image_commands.push_image("cpu", LOCAL, DATE, console, docker.DockerCli(run=fake))
    assert code == ExitCode.OK
    assert fake.calls == [
        (["docker", "version", "--format", "{{.Server.Arch}}"], True),
        (["docker", "image", "inspect", "--format", "{{.Architecture}}", dated], True),
        (["docker", "tag", dated, f"{dated}-amd64"], True),
        (["docker", "push", f"{dated}-amd64"], False),  # progress goes to the log
    ]
    assert f"pushed {dated}-amd64" in out.getvalue()


def test_push_failure_exits_3() -> None:
    dated = f"{LOCAL}/jax:cpu-{DATE}"
    fake = FakeDocker(engine_arch="arm64", local={dated: "arm64"}, failing=["docker push"])
    console, out = _console()
    assert image_commands.push_image("cpu", LOCAL, DATE, console, docker.DockerCli(run=fake)) == 3
    assert "docker push localhost:5000/jaxbench/jax:cpu-2026-11-22-arm64 failed" in out.getvalue()


@pytest.mark.parametrize(
    ("fake", "error", "expected"),
    [
        (FakeDocker(engine_arch=None), ExternalFailure, "no Docker engine answers"),
        (
            FakeDocker(engine_arch="ppc64le"),
            InvalidInput,
            r"this Docker engine's architecture 'ppc64le'.*amd64, arm64",
        ),
        (
            FakeDocker(engine_arch="amd64"),
            InvalidInput,
            rf"jax:cpu-{DATE}: no such image here \(make build FLAVOR=cpu",
        ),
        (
            FakeDocker(engine_arch="amd64", local={f"{LOCAL}/jax:cpu-{DATE}": "arm64"}),
            InvalidInput,
            "is built for arm64, this engine is amd64",
        ),
    ],
)
def test_push_refuses_without_pushing(fake: FakeDocker, error: type[Exception], expected: str) -> None:
    with pytest.raises(error, match=expected):
        image_commands.push_image("cpu", LOCAL, DATE, _console()[0], docker.DockerCli(run=fake))
    assert not [argv for argv in fake.argvs() if argv[1] in ("tag", "push")]


@pytest.mark.parametrize(
    ("flavor", "date", "expected"), [("gpu", DATE, "FLAVOR=gpu"), ("cpu", "2026-11-31", "DATE '2026-11-31'")]
)
def test_bad_push_input_fails_before_docker(flavor: str, date: str, expected: str) -> None:
    fake = FakeDocker()
    with pytest.raises(InvalidInput, match=expected):
        image_commands.push_image(flavor, LOCAL, date, _console()[0], docker.DockerCli(run=fake))
    assert fake.calls == []


# `jaxbench publish`.


def _publish(fake: FakeDocker, arches: Sequence[str] = ("amd64,arm64",)) -> tuple[int, str]:
    console, out = _console()
    code = image_commands.publish_images("cpu", LOCAL, DATE, arches, console, docker.DockerCli(run=fake))
    return code, out.getvalue()


def _creates(fake: FakeDocker) -> list[list[str]]:
    return [argv for argv in fake.argvs() if argv[1:3] == ["manifest", "create"]]


def test_publish_all_arches_moves_the_undated_tag() -> None:
    tags = {f"{LOCAL}/jax:cpu-{DATE}-amd64": "amd64", f"{LOCAL}/jax:cpu-{DATE}-arm64": "arm64"}
    fake = FakeDocker(remote=tags)
    code, _ = _publish(fake)
    assert code == ExitCode.OK == 0
    sources = list(tags)
    assert _creates(fake) == [
        ["docker", "manifest", "create", "--insecure", f"{LOCAL}/jax:cpu-{DATE}", *sources],
        ["docker", "manifest", "create", "--insecure", f"{LOCAL}/jax:cpu", *sources],
    ]
    pushed = [argv[-1] for argv in fake.argvs() if argv[1:3] == ["manifest", "push"]]
    assert pushed == [f"{LOCAL}/jax:cpu-{DATE}", f"{LOCAL}/jax:cpu"]


def test_publish_with_one_arch_missing_keeps_the_undated_tag_and_exits_5() -> None:
    fake = FakeDocker(remote={f"{LOCAL}/jax:cpu-{DATE}-amd64": "amd64"})
    code, out = _publish(fake)
    assert code == ExitCode.INCOMPLETE == 5
    assert _creates(fake) == [
        [
            "docker",
            "manifest",
            "create",
            "--insecure",
            f"{LOCAL}/jax:cpu-{DATE}",
            f"{LOCAL}/jax:cpu-{DATE}-amd64",
        ]
    ]
    assert f"{LOCAL}/jax:cpu" not in [argv[-1] for argv in fake.argvs()]
    assert "incomplete: no arm64 image of 2026-11-22" in out and f"{LOCAL}/jax:cpu not moved" in out


def test_publish_with_nothing_pushed_publishes_nothing() -> None:
    fake = FakeDocker()
    code, out = _publish(fake)
    assert code == ExitCode.INCOMPLETE
    assert [argv[1:3] for argv in fake.argvs()] == [["manifest", "--help"]] + [["manifest", "inspect"]] * 2
    assert "no amd64, arm64 image" in out and "nothing published" in out


def test_publish_leaves_out_a_tag_holding_another_arch() -> None:
    tags = {f"{LOCAL}/jax:cpu-{DATE}-amd64": "amd64", f"{LOCAL}/jax:cpu-{DATE}-arm64": "amd64"}
    fake = FakeDocker(remote=tags)
    code, out = _publish(fake)
    assert code == ExitCode.INCOMPLETE
    assert [argv[-1] for argv in _creates(fake)] == [f"{LOCAL}/jax:cpu-{DATE}-amd64"]
    assert f"jax:cpu-{DATE}-arm64: holds an image built for amd64" in out


def test_publish_registry_failure_exits_3_before_any_list() -> None:
    fake = FakeDocker(failing=["docker manifest inspect"])
    code, out = _publish(fake)
    assert code == ExitCode.FAILED == 3
    assert _creates(fake) == []
    assert "permission_denied" in out


def test_publish_without_docker_manifest_is_invalid_input() -> None:
    fake = FakeDocker(failing=["docker manifest --help"])
    with pytest.raises(InvalidInput, match="docker manifest"):
        _publish(fake)


@pytest.mark.parametrize(
    ("flavor", "date", "arches", "expected"),
    [
        ("gpu", DATE, ["amd64"], "FLAVOR=gpu"),
        ("cpu", "2026-1-2", ["amd64"], "DATE '2026-1-2'"),
        ("cpu", DATE, ["amd64,s390x"], "ARCHES/--arches 's390x'"),
    ],
)
def test_bad_publish_input_fails_before_docker(
    flavor: str, date: str, arches: list[str], expected: str
) -> None:
    fake = FakeDocker()
    with pytest.raises(InvalidInput, match=expected):
        image_commands.publish_images(flavor, LOCAL, date, arches, _console()[0], docker.DockerCli(run=fake))
    assert fake.calls == []


def test_cli_publish_bad_arch_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(docker, "DockerCli", lambda: pytest.fail("asked docker before validating the input"))
    assert cli.main(["publish", "--registry", LOCAL, "--date", DATE, "--arches", "amd64,sparc"]) == 1
    assert "ARCHES/--arches 'sparc'" in capsys.readouterr().err


def test_cli_passes_the_default_arches(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    monkeypatch.setattr(image_commands, "publish_images", lambda *args: seen.append(args) or 0)
    monkeypatch.setattr(image_commands, "push_image", lambda *args: seen.append(args) or 0)
    assert cli.main(["publish", "--flavor", "jax", "--date", DATE]) == 0
    assert cli.main(["push", "--registry", LOCAL]) == 0
    assert seen[0][:4] == ("jax", "ghcr.io/jaxbench", DATE, ("amd64", "arm64"))  # type: ignore[index]
    assert seen[1][:3] == ("cpu", LOCAL, None)  # type: ignore[index]
