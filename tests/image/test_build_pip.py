"""The image check hands the build this machine's pip settings that pip can use there, and says what it leaves out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.image.build_pip import CA_IN_BUILD, CA_SECRET, CONF_IN_BUILD, CONF_SECRET, build_pip, parse_config_list

REPO = Path(__file__).resolve().parents[2]

# `pip config list` as printed on the development machines: env first (sorted), then the files.
DEV_MACHINE_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/other.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


@pytest.mark.parametrize(
    ("listed", "expected"),
    [
        (DEV_MACHINE_LIST, {"cert": "/etc/ssl/certs/ca-certificates.crt", "default-timeout": "180"}),
        (
            "global.index-url='https://a/simple'\ninstall.index-url='https://b/simple'\n",
            {"index-url": "https://b/simple"},
        ),
        ("download.proxy='http://p:3128'\n", {}),
        ("not a config line\n\n", {}),
    ],
    ids=["env-over-files", "install-section-over-global", "other-commands-sections-ignored", "noise-ignored"],
)
def test_config_list_is_read_with_pips_precedence(listed: str, expected: dict[str, str]) -> None:
    options = parse_config_list(listed)
    assert {k: options[k] for k in expected} == expected
    assert "proxy" not in options


def test_the_dev_machine_gets_its_ca_and_timeout_and_is_told_what_stays_behind(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n...\n")
    options = {**parse_config_list(DEV_MACHINE_LIST), "cert": str(ca)}
    pip = build_pip(options, environ={})
    assert pip.conf == f"[global]\ndefault-timeout = 180\ncert = {CA_IN_BUILD}\n"
    assert pip.ca_file == ca
    assert pip.secrets(tmp_path / "pip.conf") == {CONF_SECRET: tmp_path / "pip.conf", CA_SECRET: ca}
    assert sorted(item.split(" (")[0] for item in pip.left_out) == [
        "constraint /etc/xdg/pip/constraints.txt",
        "extra-index-url file:///opt/pypi-more/simple",
        "extra-index-url file:///opt/pypi/simple",
        "find-links /opt/wheels",
    ]
    assert all(item.endswith("(a path on this machine)") for item in pip.left_out)
    assert str(ca) in pip.sensitive


@pytest.mark.parametrize(
    ("options", "environ", "conf_lines", "sensitive"),
    [
        (
            {"index-url": "https://mirror.example/simple", "extra-index-url": "file:///x https://b.example/simple"},
            {},
            ["index-url = https://mirror.example/simple", "extra-index-url = https://b.example/simple"],
            ["https://mirror.example/simple", "https://b.example/simple"],
        ),
        (
            {},
            {"HTTPS_PROXY": "http://user:pw@proxy:3128"},
            ["proxy = http://user:pw@proxy:3128"],
            ["http://user:pw@proxy:3128"],
        ),
        ({"proxy": "http://p:1"}, {"https_proxy": "http://other:2"}, ["proxy = http://p:1"], ["http://p:1"]),
        ({"trusted-host": "mirror.example", "retries": "9"}, {}, ["trusted-host = mirror.example", "retries = 9"], []),
        ({}, {}, [], []),
    ],
    ids=[
        "http-indexes-kept-file-indexes-dropped",
        "proxy-from-the-environment",
        "pips-own-proxy-over-the-environment",
        "trusted-host-and-retries-kept",
        "nothing-configured",
    ],
)
def test_what_pip_needs_to_download_is_passed(
    options: dict[str, str], environ: dict[str, str], conf_lines: list[str], sensitive: list[str]
) -> None:
    pip = build_pip(options, environ)
    assert pip.conf.splitlines() == ["[global]", *conf_lines]
    assert sorted(pip.sensitive) == sorted(sensitive)
    assert pip.ca_file is None
    assert CA_SECRET not in pip.secrets(Path("/tmp/pip.conf")), "no CA, no pip-ca secret"


@pytest.mark.parametrize(
    ("options", "environ"),
    [({}, {"REQUESTS_CA_BUNDLE": "{ca}"}), ({"cert": "{ca}"}, {"REQUESTS_CA_BUNDLE": "/nowhere.crt"})],
    ids=["requests-ca-bundle-when-pip-names-none", "pips-cert-first"],
)
def test_the_ca_bundle_is_the_one_pip_would_use(
    tmp_path: Path, options: dict[str, str], environ: dict[str, str]
) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    pip = build_pip({k: v.format(ca=ca) for k, v in options.items()}, {k: v.format(ca=ca) for k, v in environ.items()})
    assert pip.ca_file == ca
    assert f"cert = {CA_IN_BUILD}" in pip.conf.splitlines()


def test_a_cert_that_does_not_exist_is_said_and_not_passed() -> None:
    pip = build_pip({"cert": "/no/such/ca.crt"}, {})
    assert pip.ca_file is None and "cert" not in pip.conf
    assert pip.left_out == ("cert /no/such/ca.crt (no such file)",)


def test_the_dockerfile_mounts_both_secrets_where_the_tool_points_pip() -> None:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    pip_runs = [line for line in text.splitlines() if line.startswith("RUN ") and "pip install" in line]
    assert len(pip_runs) == 2, "the build stage's and the final stage's pip install"
    for run in pip_runs:
        assert f"--mount=type=secret,id={CONF_SECRET},target={CONF_IN_BUILD}" in run
        # No target: the secret lands at /run/secrets/<id>, where the pip.conf's `cert` points.
        assert re.search(rf"--mount=type=secret,id={CA_SECRET}(\s|$)", run)
        assert f"/run/secrets/{CA_SECRET}" == CA_IN_BUILD
        assert "required" not in run, "optional: a build without secrets mounts nothing"
