"""serving: how this process serves a gRPC service on a kubelet unix socket, whatever the mode.

Below both front-ends (kubelet/ for the device plugin, dra/ for the DRA driver), which must not know
each other: event_loop (the one asyncio loop every server of the process runs on), socket_files (a
0600 bind whatever the umask, a foreign file refused, only our own socket removed, path lengths),
aio_server (a grpc.aio server on that loop, started and stopped from any thread), bound_socket (the
one way both front-ends bind a server to a fresh socket and remove only their own), kept_socket (one
server kept at one path for the DRA driver: re-served when its socket or directory is removed; the
device plugin's lifecycle re-serves and registers again itself), taken_socket (a path
another process serves: waited for with backoff, never fought over) and probe (one unary call
on a socket within a deadline, its answer cached briefly). Nothing here knows a service's messages.
"""
