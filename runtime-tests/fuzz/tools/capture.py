#!/usr/bin/env python3
"""Captures what real clients send to a proxy and to a registry (the seeds of the proxy_http,
proxy_socks, proxy_sni and mirror_request fuzz targets): curl, pip and npm against a loopback
listener that records the first bytes (a SOCKS listener answers the method choice first).
Needs curl, pip, npm and node; no network (the clients get a refusal and give up).

    runtime-tests/fuzz/tools/capture.py [SEEDS_DIR]   (default: runtime-tests/fuzz/seeds)

The ClientHellos of openssl s_client against s_server are captured by capture_tls.py.
"""
import os, socket, subprocess, sys, threading

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "seeds")

def listener():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0)); s.listen(8); return s

def recv_until(c, pred, limit=1.0):
    data = b""; c.settimeout(limit)
    try:
        while not pred(data):
            b = c.recv(65536)
            if not b: break
            data += b
    except socket.timeout:
        pass
    return data

def head_done(d):
    return b"\r\n\r\n" in d or b"\n\n" in d

def serve_http(s, reply, store, body_wait=0.5):
    c, _ = s.accept()
    d = recv_until(c, head_done)
    d += recv_until(c, lambda x: False, body_wait)  # a body, if any
    store.append(d)
    try: c.sendall(reply)
    except OSError: pass
    c.close()

def capture(name, cmd, mode="http", reply=b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"):
    s = listener(); port = s.getsockname()[1]
    store = []
    def run():
        try:
            if mode == "http": serve_http(s, reply, store)
            elif mode == "socks": serve_socks(s, store)
            elif mode == "raw": serve_raw(s, store)
        except Exception as e:
            print("server:", e)
    t = threading.Thread(target=run, daemon=True); t.start()
    argv = [a.replace("PORT", str(port)) for a in cmd]
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    t.join(5)
    s.close()
    if store and store[0]:
        path = os.path.join(OUT, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").write(store[0])
        print(f"{name}: {len(store[0])} bytes")
    else:
        print(f"{name}: NOTHING")

def serve_socks(s, store):
    c, _ = s.accept(); c.settimeout(1.0)
    d = c.recv(2)
    if d[:1] == b"\x05":
        while len(d) < 2 + d[1]: d += c.recv(2 + d[1] - len(d))
        c.sendall(b"\x05\x00")
        r = b""
        while len(r) < 5: r += c.recv(5 - len(r))
        need = {1: 4 + 4 + 2, 4: 4 + 16 + 2, 3: 5 + r[4] + 2}.get(r[3], 5)
        while len(r) < need: r += c.recv(need - len(r))
        store.append(d + r)
        c.sendall(b"\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00")
    else:
        d += recv_until(c, lambda x: x.count(b"\0") >= (2 if x[4:8] == b"\0\0\0\x01" else 1) and len(x) > 8, 1.0)
        store.append(d)
        c.sendall(b"\x00\x5b\x00\x00\x00\x00\x00\x00")
    c.close()

def serve_raw(s, store):
    c, _ = s.accept()
    store.append(recv_until(c, lambda x: False, 1.5))
    c.close()


def main():
    P = "http://127.0.0.1:PORT"
    capture("proxy_http/curl-get-absolute", ["curl", "-s", "-m", "3", "-x", P, "http://example.com/path/a?q=1&r=%20"])
    capture("proxy_http/curl-post-form", ["curl", "-s", "-m", "3", "-x", P, "-d", "name=value&x=1", "http://example.com/form"])
    capture("proxy_http/curl-post-chunked", ["curl", "-s", "-m", "3", "-x", P, "-H", "Transfer-Encoding: chunked", "--data-binary", "hello chunked world", "http://example.com/upload"])
    capture("proxy_http/curl-connect", ["curl", "-s", "-m", "3", "-x", P, "https://pypi.org/simple/"], reply=b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    capture("proxy_http/curl-connect-ipv6", ["curl", "-s", "-m", "3", "-x", P, "https://[::1]:8443/"], reply=b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    capture("proxy_http/pip-get-absolute", ["pip", "download", "--no-deps", "--retries", "0", "--timeout", "3", "--proxy", P, "--trusted-host", "pypi.example", "-d", "/tmp/capout/pip", "--index-url", "http://pypi.example/simple", "requests"])
    capture("proxy_http/pip-connect", ["pip", "download", "--no-deps", "--retries", "0", "--timeout", "3", "--proxy", P, "-d", "/tmp/capout/pip", "--index-url", "https://pypi.org/simple", "requests"], reply=b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    capture("proxy_http/npm-get-absolute", ["npm", "view", "lodash", "--registry", "http://registry.example/", "--proxy", P, "--fetch-retries", "0", "--cache", "/tmp/capout/npmcache"])
    capture("proxy_http/npm-connect", ["npm", "view", "lodash", "--registry", "https://registry.npmjs.org/", "--https-proxy", P, "--fetch-retries", "0", "--cache", "/tmp/capout/npmcache"], reply=b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    M = "http://127.0.0.1:PORT"
    capture("mirror_request/pip-simple-project", ["pip", "download", "--no-deps", "--retries", "0", "--timeout", "3", "-d", "/tmp/capout/pip", "--index-url", M + "/pypi/simple", "Requests_OAuthlib"])
    capture("mirror_request/npm-packument", ["npm", "view", "lodash", "--registry", M + "/", "--fetch-retries", "0", "--cache", "/tmp/capout/npmcache"])
    capture("mirror_request/npm-scoped-packument", ["npm", "view", "@types/node", "--registry", M + "/", "--fetch-retries", "0", "--cache", "/tmp/capout/npmcache"])
    capture("mirror_request/curl-pypi-file", ["curl", "-s", "-m", "3", M + "/pypi/files/requests-2.31.0-py3-none-any.whl"])
    capture("mirror_request/curl-head-tarball", ["curl", "-s", "-m", "3", "-I", M + "/lodash/-/lodash-4.17.21.tgz"])
    capture("mirror_request/curl-pep691", ["curl", "-s", "-m", "3", "-H", "Accept: application/vnd.pypi.simple.v1+json, text/html;q=0.1", M + "/pypi/simple/"])
    S = "127.0.0.1:PORT"
    capture("proxy_socks/curl-socks5-hostname", ["curl", "-s", "-m", "3", "--socks5-hostname", S, "http://example.com/"], mode="socks")
    capture("proxy_socks/curl-socks5-ipv4", ["curl", "-s", "-m", "3", "--socks5", S, "http://127.0.0.2:8080/"], mode="socks")
    capture("proxy_socks/curl-socks5-ipv6", ["curl", "-s", "-m", "3", "--socks5", S, "http://[::1]:8080/"], mode="socks")
    capture("proxy_socks/curl-socks5-userpass", ["curl", "-s", "-m", "3", "-x", "socks5h://user:pw@" + S, "http://example.com/"], mode="socks")
    capture("proxy_socks/curl-socks4", ["curl", "-s", "-m", "3", "--socks4", S, "http://127.0.0.2:8080/"], mode="socks")
    capture("proxy_socks/curl-socks4a", ["curl", "-s", "-m", "3", "--socks4a", S, "http://example.com:8080/"], mode="socks")
    capture("proxy_sni/curl-tls", ["curl", "-s", "-m", "3", "-k", "--resolve", "example.com:PORT:127.0.0.1", "https://example.com:PORT/"], mode="raw")
    capture("proxy_sni/node-tls", ["node", "-e", "require('https').get('https://registry.npmjs.org:PORT/', {lookup:(h,o,cb)=>cb(null,'127.0.0.1',4), timeout:2000}).on('error',()=>{})"], mode="raw")
    capture("proxy_sni/python-tls", ["python3", "-c", "import socket,ssl; c=ssl.create_default_context(); s=socket.create_connection(('127.0.0.1',PORT)); s.settimeout(2)\ntry: c.wrap_socket(s, server_hostname='pypi.org')\nexcept Exception: pass"], mode="raw")


if __name__ == "__main__":
    main()
