"""The project's error hierarchy.

Every failure a caller can act on is one of these. The gRPC servicer maps them to status codes in
one function (device_plugin.dp_helper.servicer.status_for); nothing else needs to know about gRPC.
"""

from __future__ import annotations

from device_plugin.core.short_text import one_line


class PluginError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidRequestError(PluginError):
    """A kubelet request that cannot be honoured as asked (maps to INVALID_ARGUMENT)."""


class UnknownDeviceError(InvalidRequestError):
    """A device ID that this resource does not advertise."""


class UnhealthyDeviceError(InvalidRequestError):
    """A device ID that is advertised but currently unhealthy."""


FIELD_LIMIT = 160  # characters of a dotted field path in a ConfigError
MESSAGE_LIMIT = 600  # characters of its message (the longest fixed explanation is ~420)


class ConfigError(PluginError):
    """A configuration value that cannot be used; `field` names it (dotted path).

    Both parts are cut to one bounded line: they may quote keys and values from a hostile file.
    Callers quote values with device_plugin.core.short_text.short; this is the safety net.
    """

    def __init__(self, field: str, message: str) -> None:
        field, message = one_line(field, FIELD_LIMIT), one_line(message, MESSAGE_LIMIT)
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class MachineDescriptionError(ConfigError):
    """A machine-description (fake NVML) file that is malformed or impossible."""


class NvmlError(PluginError):
    """An NVML call failed; the message says which call, on which device, and NVML's reason."""

    def __init__(
        self, call: str, message: str, *, device: str | None = None, code: int | None = None
    ) -> None:
        where = f" on {device}" if device else ""
        super().__init__(f"NVML {call}{where} failed: {message}")
        self.call = call
        self.device = device
        self.code = code


class NvmlUnavailableError(NvmlError):
    """NVML could not be initialised at all (no driver, no library, no GPU)."""


class RegistrationError(PluginError):
    """The kubelet refused or could not be reached for Register."""
