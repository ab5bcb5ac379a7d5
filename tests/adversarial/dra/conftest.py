"""Fixtures every DRA adversarial test starts from: a short socket root, the claims the API would hold,
and the DRA gRPC service serving them (a test that needs another server defines its own `server`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from tests.adversarial.dra.harness import HeldClaims, dra_server


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths hold 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def claims() -> HeldClaims:
    return HeldClaims()


@pytest.fixture
def server(root: Path, claims: HeldClaims) -> Iterator[DraGrpcServer]:
    started = dra_server(root, reader=claims)
    started.start()
    yield started
    started.stop(0.1)
