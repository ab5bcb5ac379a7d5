"""The tests' API stand-in: device_plugin/standins/api_server.py's, subclassed so that every write is checked
strictly by kubernetes-validate (schema_check.py), a test-only dependency the package must not import;
`transport()` makes the helper's transport to it, closed by down().
"""

from __future__ import annotations

from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.standins.api_server import ApiStandin as _PackagedApiStandin
from testbed.schema_check import validate_strict


class ApiStandin(_PackagedApiStandin):
    def __init__(self, versions: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")) -> None:
        super().__init__(versions, validate=validate_strict)
        self._transports: list[ApiTransport] = []

    def transport(self) -> ApiTransport:
        """A transport to this stand-in with the client's default settings, closed when it goes down."""
        made = ApiTransport(api_client(self.host))
        self._transports.append(made)
        return made

    def down(self) -> None:
        while self._transports:
            self._transports.pop().shut()
        super().down()
