"""How tests/docs/test_cli_examples.py decides, on cases made by hand: a quote matches what was printed (`...`
lines standing for any lines, trailing blanks ignored), and which rule of SKIP_RULES, if any, skips a command.
"""

from __future__ import annotations

import pytest

from tests.docs.doc_commands import ELLIPSIS, matches, skip_rule


@pytest.mark.parametrize(
    ("expected", "printed", "verdict"),
    [
        (("a", "b"), ["a", "b"], True),
        (("a", "b"), ["a", "b", "c"], False),
        (("b", "c"), ["a", "b", "c"], False),
        (("a", ELLIPSIS, "c"), ["a", "b", "x", "c"], True),
        (("a", ELLIPSIS), ["a", "b"], True),
        ((ELLIPSIS, "c", "d", ELLIPSIS), ["a", "c", "x", "c", "d", "e"], True),
        ((ELLIPSIS, "c", "d", ELLIPSIS), ["c", "x", "d"], False),
        (("a", ELLIPSIS, "b", ELLIPSIS, "a"), ["a", "a", "b"], False),
        (("a  ",), ["a", ""], True),
        (("a", "b"), ["a", "B"], False),
    ],
    ids=[
        "identical",
        "unquoted-extra-line-at-the-end",
        "unquoted-extra-line-at-the-start",
        "ellipsis-skips-lines",
        "trailing-ellipsis-skips-the-rest",
        "runs-are-consecutive",
        "a-run-split-by-other-lines-fails",
        "runs-keep-their-order",
        "trailing-blanks-ignored",
        "a-changed-line-fails",
    ],
)
def test_quote_matching(expected: tuple[str, ...], printed: list[str], verdict: bool) -> None:
    assert matches(expected, printed) is verdict


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("gpu-device-plugin topology --machine dgx1-v100", None),
        (".venv/bin/gpu-device-plugin topology", "real-nvml"),
        ("gpu-device-plugin run --machine dgx1-v100 --device-plugin-dir /tmp/dp", "daemon"),
        ("gpu-device-plugin allocate --machine M --size 2 [--json]", "synopsis"),
        ("kubectl apply -k deploy/overlays/image", "cluster"),
        ("nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml", "node-set-up"),
        (".venv/bin/python tools/real_node_check.py", "real-nvml"),
        ("gpu-device-plugin labels --machine dgx1-v100", None),
        ("apt-get install --no-install-recommends containerd", "machine-set-up"),
    ],
    ids=[
        "runnable-on-a-shipped-machine",
        "no-machine-is-real-nvml",
        "run-is-a-daemon",
        "placeholders-are-a-synopsis",
        "kubectl-needs-a-cluster",
        "nvidia-ctk-is-gpu-node-set-up",
        "tool-without-machine-is-real-nvml",
        "labels-on-a-shipped-machine-runs",
        "apt-get-is-machine-set-up",
    ],
)
def test_skip_rules(command: str, rule: str | None) -> None:
    assert skip_rule(command) == rule
