#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub, for tests/pull (Python standard library only).

It serves the URL layout and headers huggingface_hub and llama.cpp rely on (huggingface_hub's
file_download.py and utils/_http.py, hf_api.py's model_info):
  GET  /api/models/ORG/NAME/revision/REV?blobs=true   {"id", "sha", "siblings": [{"rfilename",
       "size", "blobId", "lfs": {"sha256", "size", "pointerSize"}}]}   (in reverse name order)
  HEAD|GET /ORG/NAME/resolve/REV/PATH
       LFS file: 302, Location: the "CDN" (http://localhost:PORT/cdn/ORG/NAME/<sha256>?X-Amz-..,
                 another host than the endpoint's 127.0.0.1), X-Repo-Commit, X-Linked-Etag:
                 "<sha256>", X-Linked-Size, an ETag and a Content-Length of the redirect itself
       git file: 200, ETag: "<git blob id>" (W/ on some), Content-Length, X-Repo-Commit, ranges
  HEAD|GET /cdn/ORG/NAME/<sha256>   the bytes, Range: bytes=N- answered 206 with Content-Range
Errors as the hub sends them: 401 with X-Error-Code RepoNotFound (private repo, no token),
401 "Invalid credentials in Authorization header" (wrong token), 404 RepoNotFound /
RevisionNotFound / EntryNotFound, 500 where a repo is configured to fail. A renamed repo
answers with a relative 307 to its new name.

Per-file faults on the CDN (config "fault"): {"stall_at": K} the first GET sends K bytes then
hangs (a pull to kill), {"drop_at": K} the first GET sends K bytes then closes the connection,
"corrupt" one byte flipped in every answer, "ignore_range" a 200 with the whole file whatever
the Range, "wrong_range" a 206 from byte 0 whatever the Range. "listed_sha" makes the listing
claim another sha256 than resolve's X-Linked-Etag.

argv: CONFIG.json PORT_FILE LOG. Every request is one JSON line in LOG: method, path, host,
range, auth (the Authorization header or null), status, sent (body bytes), and stalled/dropped
when a fault fired. The port is written to PORT_FILE once listening."""
import hashlib
import http.server
import json
import os
import socketserver
import sys
import threading
import time
import urllib.parse

CONFIG, PORT_FILE, LOG = sys.argv[1:4]
cfg = json.load(open(CONFIG))
TOKEN = cfg.get("token")
log_lock = threading.Lock()
fault_fired = set()  # (file, kind): stall and drop happen on the first GET only


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class File:
    def __init__(self, path, spec):
        self.path = path
        if "file" in spec:
            with open(spec["file"], "rb") as f:
                self.data = f.read()
        else:
            self.data = spec.get("text", "").encode()
        self.lfs = spec.get("lfs", True)
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        self.blob_id = git_blob_id(self.data)
        self.size = spec.get("size", len(self.data))  # a size the hub claims (the huge repo)
        self.fault = spec.get("fault")
        self.vanished = spec.get("vanished", False)  # listed, but resolve says 404
        self.listed_sha = spec.get("listed_sha", self.sha256)  # what the listing claims
        self.weak = spec.get("weak_etag", False)


repos = {}
for name, r in cfg["repos"].items():
    files = {p: File(p, s) for p, s in r["files"].items()}
    repos[name] = {"commit": r["commit"], "private": r.get("private", False),
                   "fail": r.get("fail"), "files": files,
                   "by_sha": {f.sha256: f for f in files.values()}}
renamed = cfg.get("renamed", {})


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def record(self, status, sent, **extra):
        rec = {"method": self.command, "path": self.path, "host": self.headers.get("Host"),
               "range": self.headers.get("Range"), "auth": self.headers.get("Authorization"),
               "status": status, "sent": sent}
        rec.update(extra)
        with log_lock, open(LOG, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def answer(self, status, headers=(), body=b"", **extra):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        sent = 0
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            sent = len(body)
        self.record(status, sent, **extra)

    def error(self, status, code=None, message=None, commit=None):
        h = [("Content-Type", "application/json")]
        if code:
            h.append(("X-Error-Code", code))
        if message:
            h.append(("X-Error-Message", message))
        if commit:
            h.append(("X-Repo-Commit", commit))
        self.answer(status, h, json.dumps({"error": message or code or "error"}).encode())

    def authorized(self, repo):
        """True when the request may see repo; else False, the refusal sent."""
        auth = self.headers.get("Authorization")
        if auth is not None and auth != "Bearer %s" % TOKEN:
            self.error(401, None, "Invalid credentials in Authorization header")
            return False
        if repo is None or repo["private"]:
            if auth is None:
                self.error(401, "RepoNotFound", "Invalid username or password.")
                return False
            if repo is None:
                self.error(404, "RepoNotFound", "Repository not found")
                return False
        return True

    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    def route(self):
        u = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in u.path.split("/")[1:]]
        if parts[:2] == ["api", "models"] and len(parts) == 6 and parts[4] == "revision":
            return self.listing("/".join(parts[2:4]), parts[5], u.query)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), u.path)
        if len(parts) == 4 and parts[0] == "cdn":
            return self.cdn("/".join(parts[1:3]), parts[3])
        self.error(404, None, "no such route")

    def listing(self, name, rev, query):
        if name in renamed:
            new = "/api/models/%s/revision/%s?%s" % (renamed[name], rev, query)
            return self.answer(307, [("Location", new)])
        repo = repos.get(name)
        if not self.authorized(repo):
            return
        if repo["fail"] == "api500":
            return self.error(500, None, "Internal Error")
        if rev not in ("main", repo["commit"]):
            return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        sib = []
        for f in sorted(repo["files"].values(), key=lambda f: f.path, reverse=True):
            s = {"rfilename": f.path, "size": f.size, "blobId": f.blob_id}
            if f.lfs:
                s["size"] = f.size
                s["lfs"] = {"sha256": f.listed_sha, "size": f.size, "pointerSize": 134}
            sib.append(s)
        body = json.dumps({"_id": "x", "id": name, "sha": repo["commit"], "private":
                           repo["private"], "siblings": sib}).encode()
        self.answer(200, [("Content-Type", "application/json")], body)

    def resolve(self, name, rev, path, urlpath):
        if name in renamed:
            new = urlpath.replace("/" + name + "/", "/" + renamed[name] + "/", 1)
            return self.answer(307, [("Location", new)])  # relative, as the hub does
        repo = repos.get(name)
        if not self.authorized(repo):
            return
        if rev not in ("main", repo["commit"]):
            return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        if repo["fail"] == "resolve500":
            return self.error(500, None, "Internal Error")
        f = repo["files"].get(path)
        if f is None or f.vanished:
            return self.error(404, "EntryNotFound", "Entry not found", repo["commit"])
        if f.lfs:
            port = self.server.server_address[1]
            loc = "http://localhost:%d/cdn/%s/%s?X-Amz-Signature=feedbeef" % (port, name,
                                                                            f.sha256)
            body = ("Found. Redirecting to %s" % loc).encode()
            return self.answer(302, [("Location", loc), ("X-Repo-Commit", repo["commit"]),
                                     ("X-Linked-Etag", '"%s"' % f.sha256),
                                     ("X-Linked-Size", str(f.size)),
                                     ("ETag", 'W/"%s"' % git_blob_id(body)),
                                     ("Content-Length", str(len(body)))], body)
        etag = ('W/"%s"' if f.weak else '"%s"') % f.blob_id
        self.send_bytes(f, [("X-Repo-Commit", repo["commit"]), ("ETag", etag)])

    def cdn(self, name, sha):
        f = repos[name]["by_sha"].get(sha) if name in repos else None
        if f is None:
            return self.error(404, None, "NoSuchKey")
        self.send_bytes(f, [("ETag", '"%s"' % f.sha256)])

    def send_bytes(self, f, headers):
        data = f.data
        if f.fault == "corrupt" and data:
            i = len(data) // 2
            data = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and f.fault == "wrong_range":  # a 206 from another offset than asked
            headers = headers + [("Content-Range", "bytes 0-%d/%d" % (len(data) - 1, len(data)))]
            return self.answer(206, headers + [("Accept-Ranges", "bytes")], data)
        if rng and f.fault != "ignore_range":
            if not rng.startswith("bytes=") or not rng[6:].rstrip("-").isdigit() \
                    or not rng.endswith("-"):
                return self.error(400, None, "unsupported range " + rng)
            start = int(rng[6:-1])
            if start >= len(data):
                return self.answer(416, headers + [("Content-Range", "bytes */%d" % len(data))])
            status = 206
            headers = headers + [("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1,
                                                                        len(data)))]
        body = data[start:]
        headers = headers + [("Accept-Ranges", "bytes"), ("Content-Length", str(len(body))),
                             ("Content-Type", "application/octet-stream")]
        fault = f.fault if isinstance(f.fault, dict) else {}
        kind = next(iter(fault), None)
        if self.command == "GET" and kind and (id(f), kind) not in fault_fired:
            fault_fired.add((id(f), kind))
            k = fault[kind]
            self.send_response(status)
            for h, v in headers:
                self.send_header(h, v)
            self.end_headers()
            self.wfile.write(body[:k])
            self.wfile.flush()
            if kind == "stall_at":
                self.record(status, k, stalled=True)
                while True:  # until the client is killed and the test ends the server
                    time.sleep(1)
            self.record(status, k, dropped=True)
            self.close_connection = True
            return
        self.answer(status, headers, body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)  # a killed client is no error


srv = Server(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
srv.serve_forever()
