#!/usr/bin/env python3
"""A package index on loopback for the mirror tests: PEP 691 JSON (with PEP 700 upload
times) or PEP 503 HTML by content negotiation, and the files themselves.

    index_server.py SPEC.json     (prints the port, then serves until killed)

SPEC: {"files_dir": DIR, "files": [{"filename": F, "upload_time": RFC3339,
       "requires_python": "...?"}]}"""
import hashlib, http.server, json, os, re, sys

spec = json.load(open(sys.argv[1]))
files_dir = spec["files_dir"]


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def project_of(filename):
    if filename.endswith(".whl"):
        return norm(filename.split("-")[0])
    stem = re.sub(r"\.(tar\.gz|zip)$", "", filename)
    return norm(re.split(r"-(?=\d)", stem)[0])


projects = {}
for f in spec["files"]:
    data = open(os.path.join(files_dir, f["filename"]), "rb").read()
    entry = {
        "filename": f["filename"],
        "url": "../../files/" + f["filename"],
        "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
        "size": len(data),
        "upload-time": f["upload_time"],
    }
    if f.get("requires_python"):
        entry["requires-python"] = f["requires_python"]
    projects.setdefault(project_of(f["filename"]), []).append(entry)


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    head = False

    def send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.head:
            self.wfile.write(body)

    def do_HEAD(self):
        self.head = True
        self.do_GET()

    def do_GET(self):
        path = self.path.split("?")[0]
        want_json = "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
        m = re.fullmatch(r"/simple/([^/]+)/?", path)
        if path.rstrip("/") == "/simple":
            if want_json:
                body = json.dumps({"meta": {"api-version": "1.1"},
                                   "projects": [{"name": p} for p in sorted(projects)]})
                return self.send(200, body.encode(), "application/vnd.pypi.simple.v1+json")
            links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects))
            return self.send(200, links.encode(), "text/html")
        if m:
            name = norm(m.group(1))
            if name not in projects:
                return self.send(404, b"not found", "text/plain")
            if want_json:
                body = json.dumps({"meta": {"api-version": "1.1"}, "name": name,
                                   "files": projects[name]})
                return self.send(200, body.encode(), "application/vnd.pypi.simple.v1+json")
            links = "".join(
                f'<a href="{f["url"]}#sha256={f["hashes"]["sha256"]}">{f["filename"]}</a>\n'
                for f in projects[name])
            return self.send(200, links.encode(), "text/html")
        if path.startswith("/files/"):
            p = os.path.join(files_dir, os.path.basename(path))
            if os.path.isfile(p):
                return self.send(200, open(p, "rb").read(), "application/octet-stream")
        self.send(404, b"not found", "text/plain")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
