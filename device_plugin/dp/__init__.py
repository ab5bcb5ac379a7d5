"""kubelet: the device-plugin side of the kubelet's v1beta1 contract, one resource per socket.

composition (the node's inventory + config -> the Node: resources, their policies and Allocate answers),
resource_reporting (what only this mode reports: allocation quality, replicas, label inputs, the health
route to the resources), front_end (the runtime's FrontEnd over them), lifecycle (PluginManager: serve,
register, survive kubelet restarts) on lifecycle_state (the states and transitions), served (bind/stop
one socket), plugin_dir and plugin_dir_watch (the directory), registration (Register, the self-probe),
servicer (the gRPC serving, on the loop and socket files of device_plugin.serving); standin is the
kubelet played for tests and the CLI.
"""
