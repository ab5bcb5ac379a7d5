"""Stand-ins for the DRA driver's two counterparts, for tests and `demo --mode dra`; not part of the daemon.

api_server (with api_objects and api_http): the few resource.k8s.io endpoints the driver uses, over real HTTP;
kubelet: the kubelet's plugin watcher and DRA manager, over the driver's real unix sockets. The package
imports no schema library: a caller that wants every write checked against Kubernetes' schemas passes a
validator (the tests pass kubernetes-validate's strict check).
"""
