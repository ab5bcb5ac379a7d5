"""Finding the NVML mock: the reasons given where it cannot be used, the library found through symlinks stored as
text, and the environment of a profile's process. These run everywhere, on folders built here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.nvml_mock.mock_folder import ENV, SONAME, find_mock, resolve_library

ELF = b"\x7fELF\x02\x01\x01" + bytes(57)


def folder(tmp_path: Path, links: dict[str, bytes | str]) -> Path:
    """A mock-shaped folder: `links` maps file names to contents (bytes) or symlink targets (str)."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "mock-nvml-config-h100.yaml").write_text("version: '1.0'\n")
    (tmp_path / "render-pci-sysfs").write_bytes(ELF)
    for name, content in links.items():
        if isinstance(content, str):
            (tmp_path / name).symlink_to(content)
        else:
            (tmp_path / name).write_bytes(content)
    return tmp_path


LAYOUTS = [
    ("stored-link-chain", {SONAME: b"libnvidia-ml.so.550\n", "libnvidia-ml.so.550": ELF}, "libnvidia-ml.so.550"),
    ("real-symlink", {SONAME: "libnvidia-ml.so.550", "libnvidia-ml.so.550": ELF}, "libnvidia-ml.so.550"),
    ("the-library-itself", {SONAME: ELF}, SONAME),
]


@pytest.mark.parametrize(("links", "library"), [c[1:] for c in LAYOUTS], ids=[c[0] for c in LAYOUTS])
def test_the_library_is_the_elf_file_the_soname_leads_to(
    tmp_path: Path, links: dict[str, bytes | str], library: str
) -> None:
    mock, reason = find_mock({ENV: str(folder(tmp_path, links))})
    assert mock is not None, reason
    assert mock.library == (tmp_path / library).resolve()


REFUSED = [
    ("unset", None, {}, f"{ENV} is not set"),
    ("no-folder", "missing", {}, "no such folder"),
    ("no-library", "", {}, f"cannot read {{root}}/{SONAME}"),
    ("names-a-text-file", "", {SONAME: b"notes.txt", "notes.txt": b"hello"}, "neither an ELF library"),
    ("link-loop", "", {SONAME: b"a", "a": b"b", "b": b"a"}, "more than 4 stored links"),
]


@pytest.mark.parametrize(("sub", "links", "reason"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_an_unusable_mock_is_refused_with_the_reason(
    tmp_path: Path, sub: str | None, links: dict[str, bytes | str], reason: str
) -> None:
    root = folder(tmp_path, links)
    env = {} if sub is None else {ENV: str(root / sub) if sub else str(root)}
    mock, why = find_mock(env)
    assert mock is None
    assert reason.format(root=root) in why


def test_a_folder_without_profiles_is_refused(tmp_path: Path) -> None:
    root = folder(tmp_path, {SONAME: ELF})
    (root / "configs" / "mock-nvml-config-h100.yaml").unlink()
    (root / "configs").rmdir()
    assert find_mock({ENV: str(root)}) == (None, f"{ENV}={root}: no configs in the folder")


def test_a_profile_process_gets_the_library_first_the_profile_and_the_overrides(tmp_path: Path) -> None:
    mock, _ = find_mock({ENV: str(folder(tmp_path, {SONAME: ELF}))})
    assert mock is not None
    lib = mock.library_dir(tmp_path / "lib")
    assert (lib / SONAME).resolve() == mock.library
    env = mock.environment("h100", library_dir=lib, overrides=tmp_path / "o.yaml", base={"LD_LIBRARY_PATH": "/x"})
    assert env["LD_LIBRARY_PATH"] == f"{lib}:/x"
    assert env["MOCK_NVML_CONFIG"] == str(mock.config("h100"))
    assert env["MOCK_NVML_OVERRIDES"] == str(tmp_path / "o.yaml")
    with pytest.raises(FileNotFoundError, match="no profile 'v100'"):
        mock.environment("v100", library_dir=lib, overrides=tmp_path / "o.yaml")


def test_resolve_library_follows_at_most_a_few_hops(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"b")
    (tmp_path / "b").write_bytes(ELF)
    assert resolve_library(tmp_path / "a") == ((tmp_path / "b").resolve(), "")
