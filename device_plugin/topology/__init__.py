"""topology: how the node's GPUs (and RDMA NICs) are connected, as one frozen value.

model is the Topology value (GPU pairs: NVLink, NVSwitch, PCIe level, NUMA; GPU-NIC PCIe levels);
build makes it once from an NvmlBackend; facts holds the bandwidth per link kind and generation;
nvlink_groups summarises the fabric for labels. Pure values: the allocator reads them, nothing here
does I/O after build.
"""
