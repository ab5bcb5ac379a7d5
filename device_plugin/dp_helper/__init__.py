"""dp_helper: the device-plugin helper, the kubelet's v1beta1 contract that any device plugin needs
alike (dra_helper/ is its DRA pair), one resource per socket.

lifecycle (PluginManager: serve, register, survive kubelet restarts) on lifecycle_state (the states
and transitions) and lifecycle_registration (one registration round), served (bind/stop one socket),
plugin_dir and plugin_dir_watch (the kubelet's directory and its watch), registration (Register, the
self-probe), servicer (ListAndWatch, Allocate, GetPreferredAllocation: the gRPC serving, on the loop
and socket files of device_plugin.serving). It serves allocation/'s ResourceManager (a resource's
devices and policy); the front-end that composes those is device_plugin/dp/.
"""
