"""Regenerate the golden label files, one per shipped machine:

    .venv/bin/python -m tests.observability.regenerate_golden

Review the diff before committing it: a changed golden file is a changed node label in production.
"""

from __future__ import annotations

from pathlib import Path

from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.labels import compute_labels, format_features_file

GOLDEN_DIR = Path(__file__).parent / "golden" / "labels"


def expected_text(machine: str) -> str:
    backend = FakeNvml.from_machine(machine)
    try:
        return format_features_file(compute_labels(backend))
    finally:
        backend.close()


def main() -> None:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for stale in GOLDEN_DIR.glob("*.txt"):
        if stale.stem not in shipped_machine_names():
            stale.unlink()
    for machine in shipped_machine_names():
        (GOLDEN_DIR / f"{machine}.txt").write_text(expected_text(machine), encoding="utf-8")
        print(f"wrote {GOLDEN_DIR / machine}.txt")


if __name__ == "__main__":
    main()
