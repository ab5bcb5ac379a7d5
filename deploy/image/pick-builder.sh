#!/bin/sh
# `make image`'s choice of container builder: prints the first of docker, podman and buildah that works and
# says on stderr why any before it was passed over; prints nothing and exits 2 when none works.
# "Works" means its `info` succeeds: for docker that needs a daemon that answers (the CLI alone cannot build);
# podman and buildah need no daemon, but an `info` that fails (broken storage, no permission) fails a build too.
limit=""
command -v timeout >/dev/null 2>&1 && limit="timeout 30"  # an unreachable DOCKER_HOST can hang `docker info`
passed=""
for builder in docker podman buildah; do
    if ! command -v "$builder" >/dev/null 2>&1; then
        passed="$passed; $builder: not installed"
    elif ! $limit "$builder" info >/dev/null 2>&1; then
        reason="\`$builder info\` fails"
        [ "$builder" = docker ] && reason="$reason (no docker daemon answers)"
        passed="$passed; $builder: installed, but $reason"
    else
        [ -n "$passed" ] && echo "make image: picked $builder (${passed#; })" >&2
        echo "$builder"
        exit 0
    fi
done
echo "make image: no working builder (${passed#; }); install one (Debian: apt-get install buildah) or set BUILDER=" >&2
exit 2
