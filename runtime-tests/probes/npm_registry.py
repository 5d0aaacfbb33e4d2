"""A loopback npm registry for the mirror tests.

Usage: npm_registry.py SPEC.json. SPEC: {"packages": [{"name", "version", "time", "deps": {},
"bad_integrity": bool, "bin": bool, "files": {PATH: TEXT}}]}. Builds each package's tarball (package/package.json,
an index.js exporting its name and version, with "bin" a command NAME-version printing it),
serves `GET /NAME` (`@scope%2fname` too) as a packument with a `time` map and the tarballs
where registries keep them (`GET /NAME/-/BASE-VERSION.tgz`), and prints its port on stdout.
A package marked bad_integrity is served with an integrity that is not its tarball's.
"""
import base64, hashlib, http.server, io, json, sys, tarfile, urllib.parse
from collections import defaultdict

spec = json.load(open(sys.argv[1]))


def tarball(name, version, deps, bin, extra):
    pj = {"name": name, "version": version, "main": "index.js", "dependencies": deps}
    base = name.split("/")[-1]
    files = {}
    if bin:
        pj["bin"] = {base + "-version": "bin.js"}
        files["package/bin.js"] = ("#!/usr/bin/env node\nconsole.log(%s);\n" % json.dumps(version)).encode()
    files.update({
        "package/package.json": json.dumps(pj, indent=2).encode(),
        "package/index.js": ("module.exports = %s;\n" % json.dumps(
            {"name": name, "version": version})).encode(),
    })
    files.update({"package/" + k: v.encode() for k, v in extra.items()})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 0, 0o755 if path.endswith("bin.js") else 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


docs, blobs = defaultdict(lambda: {"versions": {}, "time": {}}), {}
for p in spec["packages"]:
    name, version = p["name"], p["version"]
    data = tarball(name, version, p.get("deps", {}), p.get("bin"), p.get("files", {}))
    fname = "%s/-/%s-%s.tgz" % (name, name.split("/")[-1], version)
    blobs[fname] = data
    digest = hashlib.sha512(data if not p.get("bad_integrity") else data + b"x").digest()
    d = docs[name]
    d["name"] = name
    d["versions"][version] = {
        "name": name, "version": version, "dependencies": p.get("deps", {}),
        **({"bin": {name.split("/")[-1] + "-version": "bin.js"}} if p.get("bin") else {}),
        "readme": "not kept by the mirror",
        "dist": {"tarball": None, "integrity": "sha512-" + base64.b64encode(digest).decode(),
                 "shasum": hashlib.sha1(data).hexdigest()},
        "_file": fname,
    }
    d["time"][version] = p["time"]
for d in docs.values():
    # The registry's current tags: latest is the newest, whatever the date.
    newest = max(d["time"], key=lambda v: d["time"][v])
    d["dist-tags"] = {"latest": newest}
    d["time"]["created"] = min(d["time"].values())
    d["time"]["modified"] = "2030-01-01T00:00:00.000Z"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urllib.parse.unquote(self.path.split("?")[0]).lstrip("/")
        if path in blobs:
            return self.send(200, blobs[path], "application/octet-stream")
        if path in docs:
            d = json.loads(json.dumps(docs[path]))
            for v in d["versions"].values():
                v["dist"]["tarball"] = "http://127.0.0.1:%d/%s" % (
                    self.server.server_port, v.pop("_file"))
            return self.send(200, json.dumps(d).encode(), "application/json")
        self.send(404, b'{"error":"Not found"}', "application/json")


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(srv.server_port, flush=True)
srv.serve_forever()
