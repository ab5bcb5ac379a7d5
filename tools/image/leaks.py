"""Is any build secret left in the built image? Its config and history, and every file of its filesystem.

A leak is: an environment variable that would point pip or TLS at a CA or an index (PIP_CERT and its
kind) in the image config; a secret value (the CA's path, an index URL, the proxy) in its env, labels or
history; a file at a path the Dockerfile mounts a secret on; a file holding the pip.conf that was passed;
a file holding a certificate of the passed CA bundle that the base image does not hold itself (so the
machine's own CA, e.g. a TLS-intercepting proxy's, is found even when appended to another bundle, while
the public CAs that Debian and certifi ship are not mistaken for it).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tools.image.build_pip import CA_IN_BUILD, CONF_IN_BUILD

FORBIDDEN_ENV = frozenset(
    {
        "PIP_CERT",
        "PIP_CLIENT_CERT",
        "PIP_CONFIG_FILE",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_PROXY",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "SSL_CERT_FILE",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
    }
)
SECRET_PATHS = (CONF_IN_BUILD, CA_IN_BUILD)
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.+?-----END CERTIFICATE-----", re.DOTALL)
MAX_SCANNED = 64 * 1024 * 1024  # larger files are no config or bundle; nothing in this image comes close


def config_leaks(inspected: Mapping[str, Any], sensitive: Iterable[str]) -> list[str]:
    """Leaks in `buildah inspect --type image` output: forbidden variables, secret values in env, labels, history."""
    oci = inspected["OCIv1"]
    config = oci.get("config") or {}
    env = config.get("Env") or []
    found = [f"env {item.split('=', 1)[0]} is set" for item in env if item.split("=", 1)[0] in FORBIDDEN_ENV]
    places = {
        "env": env,
        "labels": [f"{k}={v}" for k, v in (config.get("Labels") or {}).items()],
        "history": [f"{h.get('created_by', '')} {h.get('comment', '')}" for h in oci.get("history") or []],
    }
    for value in sorted({s for s in sensitive if s}):
        found += [f"{where} holds {value!r}" for where, texts in places.items() if any(value in t for t in texts)]
    return found


def pem_blocks(data: bytes) -> list[bytes]:
    return [m.group(0).replace(b"\r\n", b"\n") for m in _PEM.finditer(data)]


def files_of(root: Path) -> Iterator[tuple[Path, int]]:
    """Every regular file under `root` with its size; symlinks not followed (read from outside the image, an
    absolute one would point into the host)."""
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                yield path, info.st_size


def find_in_files(root: Path, needles: Collection[bytes]) -> dict[bytes, str]:
    """needle -> the first file under `root` (as a path in the image) whose bytes contain it."""
    found: dict[bytes, str] = {}
    if not needles:
        return found
    for path, size in files_of(root):
        if size > MAX_SCANNED:
            continue
        data = path.read_bytes().replace(b"\r\n", b"\n")
        for needle in needles:
            if needle not in found and needle in data:
                found[needle] = "/" + str(path.relative_to(root))
        if len(found) == len(needles):
            break
    return found


def machine_only_certificates(ca_bundle: bytes, base_root: Path) -> list[bytes]:
    """The certificates of `ca_bundle` that no file of the base image holds: the ones this machine added."""
    blocks = pem_blocks(ca_bundle)
    in_base = find_in_files(base_root, blocks)
    return [b for b in blocks if b not in in_base]


def rootfs_leaks(image_root: Path, passed_conf: bytes, machine_certs: Collection[bytes]) -> list[str]:
    """Leaks in the image's files: a secret's mount path, the passed pip.conf, a certificate of this machine."""
    found = [f"{p} exists (a secret's mount path)" for p in SECRET_PATHS if os.path.lexists(image_root / p[1:])]
    conf = passed_conf.replace(b"\r\n", b"\n")
    # A pip.conf with no setting ("[global]" alone) is in many files and carries nothing to leak.
    needles = [*machine_certs, *([conf] if conf.strip() != b"[global]" else [])]
    held = find_in_files(image_root, needles)
    if conf in held:
        found.append(f"{held.pop(conf)} holds the pip.conf passed to the build")
    for path in sorted(set(held.values())):
        count = list(held.values()).count(path)
        found.append(f"{path} holds {count} certificate(s) of the CA bundle passed to the build")
    return found
