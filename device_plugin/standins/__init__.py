"""Stand-ins for the kubelet and the API server, in both modes: for tests, benchmarks and the demo;
never imported by the daemon (tests/test_layering.py: only the demo and kubelet-standin commands may
import this package, and no product module beside them).

Not the judges of what the API server accepts or the kubelet does: the real ones are
(tests/real_node, docs/real-node.md, which lists where the two disagreed). They stay where only they
can do the job: answers that are slow, refused, torn or wrong, a kubelet that misbehaves on purpose,
call storms, and the demo.

- api_server (with api_objects, api_http, api_writes): the few resource.k8s.io endpoints the DRA
  driver uses, over real HTTP. It imports no schema library: a caller that wants every write checked
  against Kubernetes' schemas passes a validator (the tests pass kubernetes-validate's strict
  check).
- kubelet_dra: the kubelet's plugin watcher and DRA manager, over the driver's real unix sockets.
- kubelet_device_plugin (with kubelet_device_manager, the kubelet's device manager model): the
  kubelet's side of the device-plugin API v1beta1, over the plugin's real unix sockets.
"""
