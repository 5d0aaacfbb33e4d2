#!/usr/bin/env python3
"""Records the first TLS record a client sends through a loopback relay to a real server
(the proxy_sni seeds), for example:

    openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -subj /CN=example.com
    openssl s_server -accept 44330 -cert c.pem -key k.pem -www -quiet &
    capture_tls.py seeds/proxy_sni/openssl-tls13 44330 \\
        openssl s_client -connect 127.0.0.1:PORT -servername example.com

(PORT is replaced by the relay's port; -tls1_2, -noservername and node's tls.connect gave
the other seeds; openssl-tls13-split-records is openssl-tls13's message cut into records of
100 bytes.)
"""
import socket, subprocess, sys, threading, time, os
out, sport, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1); port = l.getsockname()[1]
got = []
def relay():
    c, _ = l.accept(); u = socket.create_connection(("127.0.0.1", sport))
    c.settimeout(1.0); data = b""
    def back():
        try:
            while True:
                b = u.recv(65536)
                if not b: break
                c.sendall(b)
        except OSError: pass
    threading.Thread(target=back, daemon=True).start()
    try:
        while True:
            b = c.recv(65536)
            if not b: break
            data += b; u.sendall(b)
    except OSError: pass
    got.append(data)
t = threading.Thread(target=relay, daemon=True); t.start()
argv = [a.replace("PORT", str(port)) for a in args]
subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)
t.join(3)
# Keep the first TLS handshake records only (the ClientHello's flight).
d = got[0] if got else b""
i = 0; keep = b""
while i + 5 <= len(d) and d[i] == 0x16:
    n = int.from_bytes(d[i+3:i+5], "big"); keep += d[i:i+5+n]; i += 5 + n
    # stop after the record that completes the first handshake message
    break
open(out, "wb").write(keep); print(out, len(keep))
