"""The DRA kubelet stand-in now lives in the package (device_plugin/dra_standin/kubelet.py, `demo --mode dra`
uses it); a thin re-export, kept so its many importers (tests, benchmarks) did not change in the move."""

from __future__ import annotations

from device_plugin.dra_standin.kubelet import KNOWN, KNOWN_HEALTH, DraKubeletStandin, HealthWatch, Registered

__all__ = ["KNOWN", "KNOWN_HEALTH", "DraKubeletStandin", "HealthWatch", "Registered"]
