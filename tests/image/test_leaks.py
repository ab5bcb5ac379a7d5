"""The leak check finds a build secret wherever it stays in an image, and does not take the public CAs for one.

Images here are directory trees laid out like a mounted image (what buildah mount gives the tool), built
from named layouts; the config cases are `buildah inspect` shaped dictionaries.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tools.image.leaks import config_leaks, machine_only_certificates, pem_blocks, rootfs_leaks


def cert(name: str) -> str:
    return f"-----BEGIN CERTIFICATE-----\nMII{name}AAAA\nBBBB{name}\n-----END CERTIFICATE-----\n"


PUBLIC = cert("PublicRootOne") + cert("PublicRootTwo")  # what Debian's ca-certificates and certifi ship
PROXY_CA = cert("EgressProxyCa")  # what this machine adds
MACHINE_BUNDLE = PUBLIC + PROXY_CA
CONF = b"[global]\ncert = /run/secrets/pip-ca\nindex-url = https://mirror.example/simple\n"


def write(root: Path, path: str, text: str | bytes) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(text.encode() if isinstance(text, str) else text)


def base_tree(root: Path) -> Path:
    write(root, "/etc/ssl/certs/ca-certificates.crt", PUBLIC)
    write(root, "/usr/bin/python3.11", b"\x7fELF...")
    return root


Layout = Callable[[Path], None]
LAYOUTS: dict[str, tuple[Layout, list[str]]] = {
    "clean-with-certifi": (lambda r: write(r, "/opt/venv/lib/certifi/cacert.pem", PUBLIC), []),
    "ca-appended-to-the-system-bundle": (
        lambda r: write(r, "/etc/ssl/certs/ca-certificates.crt", MACHINE_BUNDLE),
        ["/etc/ssl/certs/ca-certificates.crt holds 1 certificate(s) of the CA bundle passed to the build"],
    ),
    "ca-bundle-copied-whole-with-crlf": (
        lambda r: write(r, "/usr/local/share/ca.crt", MACHINE_BUNDLE.replace("\n", "\r\n")),
        ["/usr/local/share/ca.crt holds 1 certificate(s) of the CA bundle passed to the build"],
    ),
    "secret-mount-path-left-empty": (
        lambda r: write(r, "/run/secrets/pip-ca", b""),
        ["/run/secrets/pip-ca exists (a secret's mount path)"],
    ),
    "pip-conf-left-at-its-mount-path": (
        lambda r: write(r, "/etc/pip.conf", CONF),
        ["/etc/pip.conf exists (a secret's mount path)", "/etc/pip.conf holds the pip.conf passed to the build"],
    ),
    "pip-conf-copied-elsewhere": (
        lambda r: write(r, "/root/.config/pip/pip.conf", CONF),
        ["/root/.config/pip/pip.conf holds the pip.conf passed to the build"],
    ),
    "absolute-symlink-not-followed-into-the-host": (
        lambda r: (r / "etc/ssl/cert.pem").symlink_to("/etc/ssl/certs/ca-certificates.crt"),
        [],
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_files_of_the_image_are_searched_for_the_secrets(tmp_path: Path, layout: str) -> None:
    base = base_tree(tmp_path / "base")
    image = base_tree(tmp_path / "image")
    make, expected = LAYOUTS[layout]
    make(image)
    machine_certs = machine_only_certificates(MACHINE_BUNDLE.encode(), base)
    assert machine_certs == pem_blocks(PROXY_CA.encode())
    assert rootfs_leaks(image, CONF, machine_certs) == expected


def test_a_bundle_of_public_cas_only_is_no_leak_when_the_image_has_the_same(tmp_path: Path) -> None:
    # A machine whose pip `cert` is Debian's own bundle: the image's identical bundle gives nothing away.
    base = base_tree(tmp_path / "base")
    assert machine_only_certificates(PUBLIC.encode(), base) == []
    assert rootfs_leaks(base, CONF, []) == []


def test_a_pip_conf_without_settings_is_not_searched_for(tmp_path: Path) -> None:
    image = base_tree(tmp_path / "image")
    write(image, "/usr/share/example/pip.conf", "[global]\n")
    assert rootfs_leaks(image, b"[global]\n", []) == []


CLEAN_ENV = ["PATH=/opt/venv/bin:/usr/bin", "PIP_NO_CACHE_DIR=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"]


def inspected(env: list[str], history: list[str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    config = {"Env": env, "Labels": labels or {}, "Entrypoint": ["gpu-device-plugin"]}
    return {"OCIv1": {"config": config, "history": [{"created_by": h} for h in history]}}


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (inspected(CLEAN_ENV, ["/bin/sh -c --mount=type=secret,id=pip-ca pip install"]), []),
        (inspected([*CLEAN_ENV, "PIP_CERT=/run/secrets/pip-ca"], []), ["env PIP_CERT is set"]),
        (
            inspected([*CLEAN_ENV, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"], []),
            ["env SSL_CERT_FILE is set", "env holds '/etc/ssl/certs/ca-certificates.crt'"],
        ),
        (
            inspected(CLEAN_ENV, ["/bin/sh -c pip install --proxy http://u:pw@proxy:3128 x"]),
            ["history holds 'http://u:pw@proxy:3128'"],
        ),
        (
            inspected(CLEAN_ENV, [], {"index": "https://mirror.example/simple"}),
            ["labels holds 'https://mirror.example/simple'"],
        ),
    ],
    ids=["clean", "pip-cert-env", "ca-path-in-env", "proxy-in-history", "index-in-labels"],
)
def test_the_image_config_and_history_carry_no_secret(image: dict[str, Any], expected: list[str]) -> None:
    sensitive = ["/etc/ssl/certs/ca-certificates.crt", "http://u:pw@proxy:3128", "https://mirror.example/simple", ""]
    assert config_leaks(image, sensitive) == expected
