"""What the tests and the benchmarks run the project against, kept out of the product package.

`testbed.realnode` brings up a real Kubernetes control plane and a real node (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, containerd and the kubelet) on loopback for the real-node tests
and the real-scheduler benchmarks. Nothing under `device_plugin/` may import this package; it is not
installed with the product (pyproject.toml lists only the product packages).
"""
