"""GPU fabric info over NVML for the real backend: nvmlDeviceGetGpuFabricInfoV, or the older call.

It does not import pynvml: RealNvml passes its choke point `call(function, *args, device=...)` (NVML
errors become NvmlError with NVML's return code) and the library object, whose structure classes the
calls fill. nvidia-ml-py names them c_nvmlGpuFabricInfoV_t (versioned, R550+ drivers; the structure
carries its own version) and c_nvmlGpuFabricInfo_t (R535+, deprecated); both are filled through a
pointer, as the C API takes them. A driver or GPU without the call, or that answers NOT_SUPPORTED,
has no NVLink fabric: state NOT_SUPPORTED. Any other failure is an error naming the call and the
GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.fabric_types import NO_FABRIC, FabricInfo, fabric_from_nvml

# RealNvml._call: (function, *args, device=...) -> result, raising NvmlError
Call = Callable[..., Any]

# NVML return codes (C ABI).
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13
_NO_FABRIC_CODES = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})
# (function, structure class) newest first; a library or driver without the first falls back to the
# next.
_CALLS = (
    ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
    ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
)


def read_fabric_info(call: Call, library: Any, handle: Any, where: str) -> FabricInfo:
    """The GPU's fabric registration; NO_FABRIC where neither call exists or the GPU has no
    fabric."""
    for function, structure in _CALLS:
        if not hasattr(library, function) or not hasattr(library, structure):
            continue  # an nvidia-ml-py release older than the call
        info = getattr(library, structure)()
        try:
            call(function, handle, ctypes.byref(info), device=where)
        except NvmlError as exc:
            if exc.code == NVML_ERROR_FUNCTION_NOT_FOUND:
                continue  # the driver's library lacks this symbol: try the older call
            if exc.code in _NO_FABRIC_CODES:
                return NO_FABRIC
            raise
        try:
            return fabric_from_nvml(
                int(info.state), bytes(info.clusterUuid), int(info.cliqueId), int(info.status)
            )
        except ValueError as exc:
            raise NvmlError(function, f"unexpected fabric info: {exc}", device=where) from exc
    return NO_FABRIC
