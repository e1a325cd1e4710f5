import http.server, json, socket, threading, urllib.request


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"path": self.path, "ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
port = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()
for path in ("/health", "/invoices", "/invoices/42"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        print(path, r.status, json.load(r)["ok"])
with socket.create_connection(("localhost", port), timeout=5) as s:
    s.sendall(b"GET /raw HTTP/1.0\r\n\r\n")
    print(s.recv(64).split(b"\r\n")[0].decode())
srv.shutdown()
