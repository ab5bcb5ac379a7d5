"""The API-server side of a kubelet plugin: the pool's ResourceSlices, and the one transport every
request takes.

Modules: transport (HTTP to the API server on the serving loop, aiohttp: every request of the
helper, claim reads included, and the token's refresh off the loop), api_errors (what its failures
are, which are transient), connection_settings (what the `kubernetes` client's configuration says
about TLS and the proxy), kube (the client's settings, version discovery, the Node's UID), devices
(what a published device is), slices (ResourceSlice objects of one node's pool), slice_store (the
HTTP calls that touch only our slices), slice_watch (a watch that notices when others change them),
pool_compare (what the server holds against what we wrote), taint_support (whether the server keeps
device taints), publisher (the reconcile thread).
"""
