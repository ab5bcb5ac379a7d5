"""gpu_sets: the topology-aware choice of a set of whole GPUs, `Allocator` (allocator.py), and its
parts (allocation/ is the request path that asks it).

The parts, one job each: objective.py (the objective), tables.py and exact.py (the exact search on
<= 16 GPUs), bounded.py (larger machines), decision.py (decisions and explanations), nic.py and
ring.py (criterion 4's NICs, a set's ring), baselines.py and simulation.py (`simulate`: other
policies, replays). The package re-exports what allocator.py exported when it was this file, so
callers import from here.
"""

from device_plugin.gpu_sets.allocator import (
    MAX_EXACT_GPUS,
    AllocationDecision,
    Allocator,
    Explanation,
    InvalidRequestError,
)

__all__ = [
    "MAX_EXACT_GPUS",
    "AllocationDecision",
    "Allocator",
    "Explanation",
    "InvalidRequestError",
]
