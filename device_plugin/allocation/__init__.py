"""The request path: what a resource serves and how one request becomes an answer.

resources (ResourceManager: one resource name's devices and their health, under one lock), request
(a request's one validation into a sealed ValidatedRequest), protocols (the shape of a policy and of
a response builder), whole_gpu_selection (the topology policy for whole GPUs), response_builders
(what Allocate answers per device-list strategy). No gRPC, no NVML: the kubelet front-end
translates, the node runtime composes.
"""
