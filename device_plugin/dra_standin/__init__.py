"""Stand-ins for the DRA driver's two counterparts, for tests and `demo --mode dra`; not part of the daemon.

Not the judges of what the API server accepts or the kubelet does: the real ones are (tests/real_node,
docs/real-node.md, which lists where the two disagreed). They stay where only they can do the job: answers
that are slow, refused, torn or wrong, a kubelet that misbehaves on purpose, call storms, and the demo.

api_server (with api_objects and api_http): the few resource.k8s.io endpoints the driver uses, over real HTTP;
kubelet: the kubelet's plugin watcher and DRA manager, over the driver's real unix sockets. The package
imports no schema library: a caller that wants every write checked against Kubernetes' schemas passes a
validator (the tests pass kubernetes-validate's strict check).
"""
