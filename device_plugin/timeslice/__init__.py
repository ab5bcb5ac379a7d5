"""Time-slicing: replicas of a GPU (or MIG device) advertised as separate devices. Sees value types
only.

The API the composition root uses, in order:
1. resolve_sharing(config.sharing, gpus) -> SharingConfig: the section as parsed at load
   (config/sharing.py), checked against this node's GPUs (ConfigError names the field)
2. share_resources({name: base devices}, config) -> AdvertisedResources     (.devices, .shared,
   .unmatched)
3. per shared resource: ReplicaPolicy.for_resource(shared, choose_gpus) and
   ReplicaResponseBuilder.for_resource(shared, inner_builder) for its ResourceManager
4. replica_memory_mib(advertised, memory_by_id) for labels; describe_sharing(...) for `topology`
   output.
Health fan-out needs nothing here: every replica carries its GPU's gpu_indices, so
ResourceManager.set_gpu_health reaches all of them.
"""

from device_plugin.allocation.gpu_choice import ChooseGpus, lowest_index_gpus
from device_plugin.config.sharing_model import (
    Placement,
    SharedResourceSpec,
    SharingConfig,
    TimeSlicingConfig,
)
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.timeslice.config import MPS_NOT_SUPPORTED, resolve_sharing
from device_plugin.timeslice.memory import (
    NO_MEMORY_ISOLATION_WARNING,
    describe_sharing,
    replica_memory_mib,
)
from device_plugin.timeslice.policy import ReplicaPolicy
from device_plugin.timeslice.replicas import (
    AdvertisedResources,
    SharedResource,
    replica_devices,
    share_resource,
    share_resources,
)
from device_plugin.timeslice.response import ReplicaResponseBuilder

__all__ = [
    "GPU_RESOURCE",
    "MPS_NOT_SUPPORTED",
    "NO_MEMORY_ISOLATION_WARNING",
    "AdvertisedResources",
    "ChooseGpus",
    "Placement",
    "ReplicaPolicy",
    "ReplicaResponseBuilder",
    "SharedResource",
    "SharedResourceSpec",
    "SharingConfig",
    "TimeSlicingConfig",
    "describe_sharing",
    "lowest_index_gpus",
    "replica_devices",
    "replica_memory_mib",
    "resolve_sharing",
    "share_resource",
    "share_resources",
]
