"""The project's error hierarchy.

Every failure a caller can act on is one of these. The gRPC servicer maps them to status codes in
one function (device_plugin.server.status_for); nothing else needs to know about gRPC.
"""

from __future__ import annotations


class PluginError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidRequestError(PluginError):
    """A kubelet request that cannot be honoured as asked (maps to INVALID_ARGUMENT)."""


class UnknownDeviceError(InvalidRequestError):
    """A device ID that this resource does not advertise."""


class UnhealthyDeviceError(InvalidRequestError):
    """A device ID that is advertised but currently unhealthy."""


class ConfigError(PluginError):
    """A configuration value that cannot be used; `field` names it (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class MachineDescriptionError(ConfigError):
    """A machine-description (fake NVML) file that is malformed or impossible."""


class NvmlError(PluginError):
    """An NVML call failed; the message says which call, on which device, and NVML's reason."""

    def __init__(self, call: str, message: str, *, device: str | None = None, code: int | None = None) -> None:
        where = f" on {device}" if device else ""
        super().__init__(f"NVML {call}{where} failed: {message}")
        self.call = call
        self.device = device
        self.code = code


class NvmlUnavailableError(NvmlError):
    """NVML could not be initialised at all (no driver, no library, no GPU)."""


class RegistrationError(PluginError):
    """The kubelet refused or could not be reached for Register."""
