"""The documented config table (Field | Flag | Environment) matches the fields' declarations, row for row.

Reads docs/configuration.md when it exists, else README.md. A declared field with an env var or a flag
must have a row, and a row must name a declared field with exactly the declared flag and env var.
Rows that are not a config field (`(config file path)`, `(fake faults …)`) are checked by name only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from device_plugin.config.model import HEALTH_PATH, SETTINGS
from device_plugin.config.schema import CONFIG_FILE_ENV

ROOT = Path(__file__).resolve().parents[2]
HEADER = ("Field", "Flag", "Environment")


def doc_path() -> Path:
    docs = ROOT / "docs" / "configuration.md"
    return docs if docs.is_file() else ROOT / "README.md"


def table_rows(text: str) -> list[tuple[str, str, str]]:
    """The rows of the first table whose header is Field | Flag | Environment."""
    rows: list[tuple[str, str, str]] = []
    inside = False
    for line in text.splitlines():
        cells = tuple(c.strip() for c in line.strip().strip("|").split("|")) if line.startswith("|") else None
        if cells == HEADER:
            inside = True
        elif inside and cells is None:
            break
        elif inside and cells and not set("".join(cells)) <= set("-: "):
            assert len(cells) == 3, f"row {line!r} does not have three cells"
            rows.append(cells)  # type: ignore[arg-type]
    return rows


def code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def documented() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Field path -> (flag, env vars), as the table shows them (`gpuDevicePlugin.health.*` is the section)."""
    found: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    for field_cell, flag_cell, env_cell in table_rows(doc_path().read_text()):
        names = code(field_cell)
        if not names:
            continue  # a row about something else than a config field
        path = names[0].removesuffix(".*")
        flags = [f.split("[")[0].split()[0] for f in code(flag_cell)]
        assert path not in found, f"{path} has two rows"
        found[path] = (flags[0] if flags else None, tuple(code(env_cell)))
    return found


def declared() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Field path -> (flag, env vars) for the fields a user can set from outside the file."""
    table = {}
    for d in SETTINGS:
        env = (d.setting.env, *d.setting.env_aliases) if d.setting.env else d.setting.section_env
        if d.setting.cli is not None or env:
            table[d.path] = (d.setting.cli.flag if d.setting.cli else None, env)
    return table


def test_the_table_is_found() -> None:
    assert len(table_rows(doc_path().read_text())) >= len(declared()), f"no complete config table in {doc_path()}"


@pytest.mark.parametrize("path", sorted(declared()))
def test_every_declared_field_with_env_or_flag_has_its_row(path: str) -> None:
    rows = documented()
    assert path in rows, f"{path} is declared but has no row in {doc_path().name}'s config table"
    assert rows[path] == declared()[path], f"{path}: the table shows {rows[path]}, declared {declared()[path]}"


def test_every_row_is_a_declared_field() -> None:
    extra = set(documented()) - set(declared())
    assert not extra, f"rows for fields not declared (or with neither env nor flag): {sorted(extra)}"


def test_the_config_file_row_names_flag_and_env() -> None:
    rows = table_rows(doc_path().read_text())
    assert any(code(flag) == ["--config"] and code(env) == [CONFIG_FILE_ENV] for _, flag, env in rows)


def test_health_row_lists_the_section_env_vars() -> None:
    assert documented()[HEALTH_PATH][1] == ("DP_DISABLE_HEALTHCHECKS", "DP_ENABLE_HEALTHCHECKS")
