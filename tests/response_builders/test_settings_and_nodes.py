"""Strategy parsing, settings validation, the /dev scan and the refusals of the response builders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from device_plugin.allocation.response_builders import (
    DeviceIdStrategy,
    DeviceListStrategy,
    DeviceNodes,
    ResponseSettings,
    StrategyResponseBuilder,
    parse_device_id_strategy,
    parse_device_list_strategies,
    response_settings,
    scan_device_nodes,
)
from device_plugin.config.model import parse_config
from device_plugin.core.errors import ConfigError
from tests.response_builders.cases import CA, CC, INDEX, MIG_INDICES, TWO_GPUS, E, V, gpu, mig, s

PARSE_CASES = [
    ("envvar", (E,)),
    ("envvar,cdi-cri", (E, CC)),
    (" cdi-cri , envvar ", (E, CC)),  # the env var form, spaces tolerated, canonical order
    (["volume-mounts", "cdi-annotations"], (V, CA)),  # the config file's list form
    (["envvar", "envvar"], (E,)),
]


@pytest.mark.parametrize(("value", "expected"), PARSE_CASES, ids=["one", "comma", "spaces-order", "list", "dup"])
def test_parse_device_list_strategies(value: str | list[str], expected: tuple[DeviceListStrategy, ...]) -> None:
    assert parse_device_list_strategies(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [("", "at least one"), ([], "at least one"), ("envvar,cdi", "unknown strategy cdi"), (["nvidia"], "nvidia")],
    ids=["empty-string", "empty-list", "unknown-in-comma-list", "unknown-in-list"],
)
def test_parse_device_list_strategies_refuses(value: str | list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_device_list_strategies(value)
    assert info.value.field == "flags.plugin.deviceListStrategy"


@pytest.mark.parametrize(
    ("value", "expected"), [("uuid", DeviceIdStrategy.UUID), ("index", DeviceIdStrategy.INDEX)], ids=["uuid", "index"]
)
def test_parse_device_id_strategy(value: str, expected: DeviceIdStrategy) -> None:
    assert parse_device_id_strategy(value) is expected


def test_parse_device_id_strategy_refuses_unknown() -> None:
    with pytest.raises(ConfigError, match="'serial'") as info:
        parse_device_id_strategy("serial")
    assert info.value.field == "flags.plugin.deviceIDStrategy"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"device_list_strategies": ()}, "flags.plugin.deviceListStrategy"),
        ({"host_dev_root": "run/nvidia/driver"}, "flags.nvidiaDevRoot"),
        ({"cdi_annotation_prefix": "cdi.k8s.io"}, "flags.plugin.cdiAnnotationPrefix"),
        ({"cdi_annotation_prefix": "CDI.k8s.io/"}, "flags.plugin.cdiAnnotationPrefix"),
        ({"cdi_kind": "nvidia.com=gpu"}, "cdi kind"),
    ],
    ids=["no-strategy", "relative-dev-root", "prefix-without-slash", "prefix-upper-case", "kind-without-class"],
)
def test_settings_refuse_bad_values(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ResponseSettings(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_settings_equal_whatever_the_strategy_order() -> None:
    assert s(CC, E) == s(E, CC)


@pytest.mark.parametrize(
    ("settings", "expected_words"),
    [
        (s(E), []),
        (s(CC, pass_device_specs=True), ["passDeviceSpecs has no effect"]),
        (s(E, V), ["envvar's list is replaced"]),
    ],
    ids=["plain", "specs-with-only-cdi", "envvar-with-volume-mounts"],
)
def test_settings_notes_say_what_has_no_effect(settings: ResponseSettings, expected_words: list[str]) -> None:
    notes = settings.notes()
    assert len(notes) == len(expected_words)
    for note, words in zip(notes, expected_words, strict=True):
        assert words in note


def test_index_strategy_refuses_mig_device_without_index() -> None:
    builder = StrategyResponseBuilder(s(E, ids=INDEX), mig_indices={})
    with pytest.raises(ConfigError, match=mig(0).id) as info:
        builder.build([mig(0)])
    assert info.value.field == "flags.plugin.deviceIDStrategy"
    with pytest.raises(ConfigError):
        builder.check_devices([gpu(0), mig(0)])


def test_check_devices_accepts_what_build_can_name() -> None:
    StrategyResponseBuilder(s(E, ids=INDEX), mig_indices=MIG_INDICES).check_devices([gpu(0), mig(0), mig(1)])


def test_empty_request_gives_empty_lists_not_errors() -> None:
    allocation = StrategyResponseBuilder(s(E, CA, CC)).build([])
    assert dict(allocation.envs) == {"NVIDIA_VISIBLE_DEVICES": ""}
    assert not allocation.annotations
    assert allocation.cdi_devices == ()


def test_cdi_annotation_key_is_a_valid_kubernetes_annotation_key() -> None:
    allocation = StrategyResponseBuilder(s(CA)).build(TWO_GPUS)
    (key,) = allocation.annotations
    prefix, _, name = key.partition("/")
    assert prefix == "cdi.k8s.io"
    assert len(name) <= 63
    assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", name)


def test_cdi_annotation_keys_differ_for_different_device_sets() -> None:
    builder = StrategyResponseBuilder(s(CA))
    (first,) = builder.build([gpu(0)]).annotations
    (second,) = builder.build([gpu(1)]).annotations
    assert first != second


def test_device_specs_follow_minor_numbers_when_they_differ_from_indices() -> None:
    nodes = DeviceNodes(gpu_minors=frozenset({5}), minor_by_index={0: 5})
    allocation = StrategyResponseBuilder(s(E, pass_device_specs=True), nodes).build([gpu(0)])
    assert [d.container_path for d in allocation.device_specs] == ["/dev/nvidia5"]


def test_device_specs_skip_gpu_nodes_that_do_not_exist() -> None:
    nodes = DeviceNodes(gpu_minors=frozenset({0}))
    allocation = StrategyResponseBuilder(s(E, pass_device_specs=True), nodes).build([gpu(0), gpu(2)])
    assert [d.container_path for d in allocation.device_specs] == ["/dev/nvidia0"]


def _touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


SCAN_CASES = [
    ((), (), ()),
    (
        ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia0", "nvidia1"),
        ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"),
        (0, 1),
    ),
    (("nvidia-modeset", "nvidia7"), ("/dev/nvidia-modeset",), (7,)),
    (("nvidia-caps/nvidia-cap1", "nvidia01", "nvidiafoo", "nvidia12"), (), (12,)),
]


@pytest.mark.parametrize(
    ("files", "control", "minors"), SCAN_CASES, ids=["empty-dev", "full-node", "partial", "ignores-non-gpu-names"]
)
def test_scan_device_nodes(
    tmp_path: Path, files: tuple[str, ...], control: tuple[str, ...], minors: tuple[int, ...]
) -> None:
    _touch(tmp_path, *files)
    nodes = scan_device_nodes(tmp_path)
    assert nodes.control == control
    assert nodes.gpu_minors == frozenset(minors)


def test_scan_of_missing_dev_root_finds_nothing(tmp_path: Path) -> None:
    assert scan_device_nodes(tmp_path / "absent") == DeviceNodes()


CONFIG_CASES = [
    ({"version": "v1"}, ResponseSettings()),
    (
        {
            "version": "v1",
            "flags": {
                "nvidiaDriverRoot": "/run/nvidia/driver",
                "plugin": {
                    "deviceListStrategy": ["cdi-cri", "envvar"],
                    "deviceIDStrategy": "index",
                    "passDeviceSpecs": True,
                    "cdiAnnotationPrefix": "example.com/",
                },
            },
        },
        ResponseSettings((E, CC), INDEX, True, "/run/nvidia/driver", "example.com/"),
    ),
    (
        {"version": "v1", "flags": {"nvidiaDriverRoot": "/run/nvidia/driver", "nvidiaDevRoot": "/"}},
        ResponseSettings(host_dev_root="/"),
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), CONFIG_CASES, ids=["defaults", "every-field", "dev-root-overrides-driver-root"]
)
def test_settings_from_the_daemon_config(raw: dict[str, object], expected: ResponseSettings) -> None:
    assert response_settings(parse_config(raw).flags) == expected
