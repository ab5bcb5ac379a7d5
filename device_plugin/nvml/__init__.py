"""The hardware boundary: the NvmlBackend protocol and its value types here; the backends beside
them.

Three parts, each a place of its own: the boundary (this package's modules: protocol, types and the
other *_types, MIG profile facts, telemetry, recovery actions, the host's sysfs and /dev readers
both backends share, and backends.py, which opens one backend), real/ (pynvml: the only code that
imports it) and fake/ (the machine-description model). Neither backend imports the other, and the
boundary imports neither (backends.py, the chooser, excepted): tests/test_layering.py checks it.
Everything above this package sees value types and the protocol only.
"""
