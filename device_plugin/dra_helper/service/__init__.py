"""The kubelet side of a kubelet plugin: the sockets and the gRPC services the kubelet calls.

Modules: grpc_service (the registration and DRA sockets, served and kept through
device_plugin.serving), servicers (registration and DRAPlugin: NodePrepareResources & co. over the
Preparer), offload (the worker pools a prepare's blocking steps run in), device_health and
health_service (the devices' health streamed to the kubelet's DRAResourceHealth watchers, KEP-4680).
"""
