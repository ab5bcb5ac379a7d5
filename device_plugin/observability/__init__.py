"""observability: what the plugin tells operators: Prometheus metrics, the HTTP endpoint, node
labels.

metrics and collectors (scrape-time readers) on an injected registry; http_endpoint answers
/metrics, /healthz and /readyz, served by http_serving's bounded asyncio loop; labels computes the
GFD-style and topology labels and keeps the NFD features file in step. No gRPC and no kubelet
knowledge.
"""
