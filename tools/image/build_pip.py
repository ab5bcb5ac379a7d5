"""pip's settings for the image build, taken from this machine's pip, handed over only as build secrets.

pip in the build must reach the package index as pip here does: the same index URLs, proxy and CA bundle.
The Dockerfile mounts two optional secrets while pip runs: `pip.conf` at /etc/pip.conf (a pip config file
that pip reads there) and `pip-ca` at /run/secrets/pip-ca (the CA bundle that config's `cert` names).
Nothing of them is written into a layer; tools/image/leaks.py checks that on the built image.

What is taken: `pip config list` (the config files and PIP_* variables, variables first, then the
[install] section, then [global]), and the proxy and CA variables pip honours when its config names none.
What is left out, and said: settings that point at this machine's disk (find-links, constraints, file://
indexes), which the build cannot see, and everything else pip does not need to download.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CONF_SECRET, CA_SECRET = "pip.conf", "pip-ca"
CONF_IN_BUILD, CA_IN_BUILD = "/etc/pip.conf", "/run/secrets/pip-ca"  # where the Dockerfile mounts them
KEPT = ("index-url", "extra-index-url", "trusted-host", "proxy", "timeout", "default-timeout", "retries")
URL_OPTIONS = ("index-url", "extra-index-url")
SECTIONS = (":env:", "install", "global")  # the first that sets an option wins, as in pip
PROXY_VARIABLES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")  # read by pip's HTTP client when no `cert` is set


@dataclass(frozen=True)
class BuildPip:
    """The build's pip settings: the pip.conf secret's text, the file for the pip-ca secret, what was left out."""

    conf: str
    ca_file: Path | None
    left_out: tuple[str, ...]
    sensitive: tuple[str, ...]  # values that must never appear in the image's config or history

    def secrets(self, conf_file: Path) -> dict[str, Path]:
        """Build secret id -> file, given where `conf` was written."""
        return {CONF_SECRET: conf_file, **({CA_SECRET: self.ca_file} if self.ca_file else {})}


def parse_config_list(text: str) -> dict[str, str]:
    """`pip config list` output (`section.option='value'` lines) -> option -> the value pip would use."""
    by_section: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        name, sep, quoted = line.partition("=")
        section, dot, option = name.rpartition(".")
        if not (sep and dot):
            continue
        value = ast.literal_eval(quoted) if quoted[:1] in ("'", '"') else quoted
        by_section.setdefault(section, {})[option] = str(value)
    merged: dict[str, str] = {}
    for section in reversed(SECTIONS):
        merged.update(by_section.get(section, {}))
    return merged


def machine_pip_options() -> dict[str, str]:
    """The options pip on this machine runs with (this interpreter's pip reads the same files and variables)."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True)
    return parse_config_list(done.stdout)


def build_pip(options: Mapping[str, str], environ: Mapping[str, str]) -> BuildPip:
    """The build's pip settings from this machine's pip `options` and environment."""
    lines, left_out, sensitive = ["[global]"], [], []
    for option in KEPT:
        if option not in options:
            continue
        value = options[option]
        if option in URL_OPTIONS:
            urls = value.split()
            value = " ".join(u for u in urls if u.startswith(("https://", "http://")))
            left_out += [f"{option} {u} (a path on this machine)" for u in urls if u not in value.split()]
            sensitive += value.split()
        if value:
            lines.append(f"{option} = {value}")
    proxy = options.get("proxy") or next((environ[v] for v in PROXY_VARIABLES if environ.get(v)), None)
    if proxy:
        sensitive.append(proxy)
        if "proxy" not in options:
            lines.append(f"proxy = {proxy}")
    cert = options.get("cert") or next((environ[v] for v in CA_VARIABLES if environ.get(v)), None)
    ca_file = Path(cert) if cert and Path(cert).is_file() else None
    if cert and ca_file is None:
        left_out.append(f"cert {cert} (no such file)")
    if ca_file is not None:
        lines.append(f"cert = {CA_IN_BUILD}")
        sensitive.append(str(ca_file))
    for option in sorted(set(options) - {*KEPT, "cert"}):
        value = options[option]
        local = value.startswith(("/", "file:"))
        left_out.append(f"{option} {value} ({'a path on this machine' if local else 'not needed to download'})")
    return BuildPip("\n".join(lines) + "\n", ca_file, tuple(left_out), tuple(sensitive))
