"""MIG discovery, strategies and allocation (issue: MIG). Sees device_plugin value types only.

Not built yet: MIG-enabled GPUs are not discovered or advertised by this version.
"""
