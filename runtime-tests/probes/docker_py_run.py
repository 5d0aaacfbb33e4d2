"""Runs a container through docker-py as a harness would (SWE-bench's does), naming no
runtime: the daemon's default applies. Prints the runtime the container got, its output and
its exit code. Usage: DOCKER_HOST=unix://SOCK python3 docker_py_run.py IMAGE"""

import sys

import docker

client = docker.from_env(timeout=120)
container = client.containers.run(
    sys.argv[1], ["sh", "-c", "echo from docker-py; date +%F"], detach=True
)
try:
    result = container.wait(timeout=120)
    container.reload()
    print("runtime", container.attrs["HostConfig"]["Runtime"])
    sys.stdout.write(container.logs().decode())
    print("exit", result["StatusCode"])
finally:
    container.remove(force=True)
