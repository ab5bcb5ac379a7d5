"""topology: how the node's GPUs (and RDMA NICs) are connected, as one frozen value.

model is the Topology value and the one source of derived topology facts (GPU pairs: NVLink,
NVSwitch, PCIe level, NUMA; NVLink domains; each GPU's PCIe path and root; GPU-NIC PCIe levels;
bandwidth tiers); build makes it once from an NvmlBackend; components holds the one
connected-components routine (and the largest clique); facts holds the bandwidth per link kind and
generation. Pure values: the allocator, labels and the DRA inventory read them; nothing here does
I/O after build.
"""
