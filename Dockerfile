# syntax=docker/dockerfile:1
# gpu-device-plugin image: the package and its pinned runtime dependencies on a slim Python 3.11 base.
#   docker build -t gpu-device-plugin:0.1.0 .
# The default command is `gpu-device-plugin run`; any other subcommand can be passed as arguments
# (e.g. `docker run --rm gpu-device-plugin:0.1.0 topology --machine dgx1-v100`).
# Base pinned to an exact release tag; a release build should also pin its digest (@sha256:...).
# Behind a TLS-intercepting proxy or with a private index, give pip its settings as build secrets: they are
# mounted only while pip runs and never stored in a layer; without them nothing is mounted.
#   docker build --secret id=pip.conf,src=build-pip.conf --secret id=pip-ca,src=ca.crt -t ... .
# build-pip.conf is a pip config file (e.g. `[global]` `cert = /run/secrets/pip-ca`, `index-url = ...`).
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY deploy/image/build-requirements.txt /tmp/build-requirements.txt
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf --mount=type=secret,id=pip-ca \
    pip install --no-deps -r /tmp/build-requirements.txt
COPY pyproject.toml README.md ./
COPY api ./api
COPY device_plugin ./device_plugin
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility
COPY deploy/image/requirements.txt /tmp/requirements.txt
COPY --from=build /wheels /tmp/wheels
# --no-deps: exactly the pinned set, nothing resolved at build time.
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf --mount=type=secret,id=pip-ca \
    pip install --no-deps -r /tmp/requirements.txt /tmp/wheels/*.whl \
    && rm -rf /tmp/requirements.txt /tmp/wheels
# Root, deliberately: the plugin must create its socket in the kubelet's /var/lib/kubelet/device-plugins
# and connect to kubelet.sock, both root-owned and not writable by others; NVML opens /dev/nvidia*.
# The DaemonSet drops every capability, forbids privilege escalation and mounts the image read-only,
# so UID 0 here grants no more than ordinary file access to those paths.
USER 0:0
ENTRYPOINT ["gpu-device-plugin"]
CMD ["run"]
