"""dp: the device-plugin front-end, what is ours on the device-plugin side (dra/ is its DRA pair).

composition (the node's inventory + config -> the resources, their policies and Allocate answers),
resource_reporting (what only this mode reports: allocation quality, replicas, label inputs, the
health route to the resources), front_end (the runtime's FrontEnd over the helper's PluginManagers,
one per resource). The kubelet's v1beta1 contract itself is device_plugin/dp_helper/; the kubelet
stand-in is device_plugin/standins/kubelet_device_plugin.py.
"""
