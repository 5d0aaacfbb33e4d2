"""Runs a container through docker-py as a harness would (SWE-bench's does), naming no
runtime: the daemon's default applies. Prints the runtime the container got, its output and
its exit code.

Usage: DOCKER_HOST=unix://SOCK python3 docker_py_run.py IMAGE [--src DIR] CMD...
(--src: DIR is mounted at /src, the working directory)."""

import sys

import docker

image, args = sys.argv[1], sys.argv[2:]
options = {}
if args[:1] == ["--src"]:
    options = {"volumes": {args[1]: {"bind": "/src", "mode": "rw"}}, "working_dir": "/src"}
    args = args[2:]
client = docker.from_env(timeout=120)
container = client.containers.run(image, args, detach=True, **options)
try:
    result = container.wait(timeout=120)
    container.reload()
    print("runtime", container.attrs["HostConfig"]["Runtime"])
    sys.stdout.write(container.logs().decode())
    print("exit", result["StatusCode"])
finally:
    container.remove(force=True)
