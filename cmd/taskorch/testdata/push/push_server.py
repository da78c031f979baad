# The push endpoint of the end-to-end tests (cmd/taskorch/e2e_push_test.go): a real HTTP server,
# Python's standard library only, that checks each request's signature with verify() from the
# example of docs/worker.md ("An endpoint in Python", which the test writes next to this script
# as push_endpoint.py) and answers as the task's payload asks ("mode"). It prints one JSON line
# per event on stdout: listening (with its port), request, bad_signature, aborted (the client
# closed the connection while the answer was held back).
import json
import os
import select
import socket
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from push_endpoint import SECRETS, verify

lock = threading.Lock()
calls = {}  # task_id -> requests seen


def log(**event):
    with lock:
        sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", ctype="application/json", headers=None):
        self.send_response(status)
        if body:
            self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def hold(self, task_id, seconds):
        """Holds the answer back for seconds, or until the client closes the connection: True if it did."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([self.connection], [], [], 0.05)
            if r:
                try:
                    data = self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    log(event="aborted", task_id=task_id, held=round(seconds - (end - time.monotonic()), 3))
                    return True
        return False

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verify(SECRETS, self.headers, body):
            log(event="bad_signature", path=self.path)
            return self.answer(401, b'{"error":"bad signature"}')
        task = json.loads(body)
        tid, payload = task["task_id"], task["payload"]
        with lock:
            calls[tid] = calls.get(tid, 0) + 1
            n = calls[tid]
        mode = payload.get("mode", "json")
        log(event="request", task_id=tid, call=n, mode=mode, attempt=task["attempt"],
            max_attempts=task["max_attempts"], lease_id=task["lease_id"],
            idempotency_key=self.headers.get("Idempotency-Key"),
            deadline=self.headers.get("Taskorch-Deadline"), body_deadline=task.get("deadline"),
            webhook_id=self.headers.get("webhook-id"), signatures=len(self.headers.get("webhook-signature", "").split()),
            workflow_id=task.get("workflow_id"), parents=task.get("parents"))
        if mode == "json":
            return self.answer(200, json.dumps({"echo": payload, "attempt": task["attempt"],
                                                "parents": task.get("parents")}).encode())
        if mode == "empty":
            return self.answer(204)
        if mode == "text":
            return self.answer(200, b"plain text, not JSON", "text/plain")
        if mode == "429":
            if n == 1:
                ra = payload.get("retry_after", "1")
                if ra == "date":
                    ra = formatdate(time.time() + 2, usegmt=True)
                return self.answer(429, b"slow down", "text/plain", {"Retry-After": ra})
            return self.answer(200, json.dumps({"calls": n}).encode())
        if mode == "400":
            # An answer that echoes what it should not: the secret and an Authorization header.
            echo = "bad request; secret=%s; Authorization: Bearer sk_live_abc123; signature %s; %s" % (
                SECRETS[0], self.headers.get("webhook-signature"), "x" * 2000)
            return self.answer(400, echo.encode(), "text/plain")
        if mode == "500-then-ok":
            if n == 1:
                return self.answer(500, b"database on fire", "text/plain")
            return self.answer(200, json.dumps({"calls": n}).encode())
        if mode == "slow-then-ok":
            if n == 1:
                self.hold(tid, 120)
                return
            return self.answer(200, json.dumps({"calls": n}).encode())
        if mode == "hold":
            if self.hold(tid, payload["seconds"]):
                return
            return self.answer(200, json.dumps({"held": payload["seconds"]}).encode())
        if mode in ("hang", "hang-first"):
            if mode == "hang" or n == 1:
                if self.hold(tid, 600):
                    return
            return self.answer(200, json.dumps({"calls": n}).encode())
        return self.answer(422, b"unknown mode", "text/plain")


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    log(event="listening", port=server.server_address[1])
    server.serve_forever()
