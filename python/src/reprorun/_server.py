"""The command server a long-lived sandbox runs inside (standard library only).

It reads one JSON request a line on standard input and writes one JSON reply a line on
standard output, each with the request's ``id``; requests run in threads of their own, so a
slow command does not hold up the next. Bytes travel base64-encoded. Requests:

- ``{"op": "exec", "argv": [...], "input": B64|null, "cwd": str|null, "env": {}, "timeout": s|null}``
  -> ``{"exit_code", "stdout", "stderr", "timed_out", "truncated"}``
- ``{"op": "read", "path": str, "limit": bytes|null}`` (at most 64 MiB) -> ``{"data"}``
- ``{"op": "write", "path": str, "data": B64}`` -> ``{}``

A failure is ``{"error": message, "kind": "not_found"|"is_directory"|"permission"|"too_large"|"other"}``.
The server ends when its standard input does.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import threading

LIMIT = int(os.environ.get("REPRORUN_SERVER_OUTPUT_LIMIT", str(16 << 20)))
_out_lock = threading.Lock()
_out = sys.stdout.buffer


def _send(obj):
    line = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    with _out_lock:
        _out.write(line)
        _out.flush()


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def _kind(err):
    if isinstance(err, FileNotFoundError):
        return "not_found"
    if isinstance(err, IsADirectoryError):
        return "is_directory"
    if isinstance(err, PermissionError):
        return "permission"
    return "other"


def _drain(stream, sink, state):
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        room = LIMIT - len(sink)
        if room > 0:
            sink += chunk[:room]
        if len(chunk) > max(room, 0):
            state["truncated"] = True


def _exec(req):
    env = dict(os.environ)
    env.update(req.get("env") or {})
    data = req.get("input")
    proc = subprocess.Popen(
        req["argv"],
        cwd=req.get("cwd") or None,
        env=env,
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out, err, state = bytearray(), bytearray(), {"truncated": False}
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out, state), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err, state), daemon=True),
    ]
    for t in readers:
        t.start()
    if data is not None:
        try:
            proc.stdin.write(base64.b64decode(data))
        except BrokenPipeError:
            pass
        proc.stdin.close()
    timed_out = False
    try:
        proc.wait(timeout=req.get("timeout"))
    except subprocess.TimeoutExpired:
        timed_out = True
    # The command's process group goes with it, background children included (a daemon that
    # must outlive the call starts a session of its own and closes its output).
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    for t in readers:
        t.join()
    code = proc.returncode
    if code < 0:
        code = 128 - code
    if timed_out:
        code = 124  # as `timeout` and reprorun's own --timeout report it
    return {
        "exit_code": code,
        "stdout": _b64(bytes(out)),
        "stderr": _b64(bytes(err)),
        "timed_out": timed_out,
        "truncated": state["truncated"],
    }


class TooLarge(Exception):
    pass


def _read(req):
    limit = min(int(req.get("limit") or LIMIT), 64 << 20)
    with open(req["path"], "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{req['path']}: file is over {limit} bytes")
    return {"data": _b64(data)}


def _write(req):
    path = req["path"]
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    return {}


OPS = {"exec": _exec, "read": _read, "write": _write}


def _handle(req):
    rid = req.get("id")
    try:
        reply = OPS[req["op"]](req)
    except FileNotFoundError as e:
        reply = {"error": str(e), "kind": "not_found"}
    except TooLarge as e:
        reply = {"error": str(e), "kind": "too_large"}
    except (OSError, KeyError, TypeError, ValueError) as e:
        reply = {"error": f"{type(e).__name__}: {e}", "kind": _kind(e)}
    reply["id"] = rid
    _send(reply)


def main():
    _send({"ready": True, "pid": os.getpid(), "cwd": os.getcwd()})
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        threading.Thread(target=_handle, args=(req,), daemon=True).start()


main()
