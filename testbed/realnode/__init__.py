"""A real Kubernetes control plane and node on loopback, started from the binaries a test run is given.

`binaries` finds the programs (or says which is missing), `pki` makes the throw-away certificates,
`control_plane` runs etcd and the three control-plane servers, `images` builds the pause and busybox images
(no registry exists here), `container_runtime` runs containerd, `kubelet` the node agent, `kubectl` the
client the tests speak through, and `cluster` puts them together. See docs/real-node.md.
"""
