"""The `node` fixture (tests/dra/driver_node.py) for every DRA test module here; a module that needs another
machine defines its own `node`."""

from tests.dra.driver_node import node  # noqa: F401 - the fixture
