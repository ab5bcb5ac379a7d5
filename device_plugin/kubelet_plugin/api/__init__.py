"""The API-server side of a kubelet plugin, through the `kubernetes` client: the pool's ResourceSlices.

Modules: devices (what a published device is), slices (ResourceSlice objects of one node's pool), kube
(the client, version discovery, transient errors), slice_store (the HTTP calls that touch only our
slices), slice_watch (a watch that notices when others change them), pool_compare (what the server holds against
what we wrote), taint_support (whether the server keeps device taints), publisher (the reconcile thread).
"""
