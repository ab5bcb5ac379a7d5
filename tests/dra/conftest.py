"""The `node` fixture (testbed/dra_node.py) for every DRA test module here; a module that needs another
machine defines its own `node`."""

from testbed.dra_node import node  # noqa: F401 - the fixture
