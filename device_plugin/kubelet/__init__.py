"""kubelet: the device-plugin side of the kubelet's v1beta1 contract, one resource per socket.

lifecycle (PluginManager: serve, register, survive kubelet restarts) runs on lifecycle_state (the
states and transitions), served (bind/stop one socket), plugin_dir and plugin_dir_watch (the
directory), registration (Register, the self-probe), servicer (the gRPC serving, on the loop and
socket files of device_plugin.serving); standin is the kubelet played for tests and the CLI.
"""
