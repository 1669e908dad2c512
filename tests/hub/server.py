#!/usr/bin/env python3
"""A fake Hugging Face Hub for kvplan's tests (Python 3 standard library only).

    python3 tests/hub/server.py --repos REPOS.json --port-file FILE [--log FILE]

Listens on 127.0.0.1 on a free port, writes that port to FILE once it is
listening, and serves until SIGTERM/SIGINT.  It mirrors what a client of the
real Hub sees:

  GET      /api/models/ORG/NAME[/revision/REV]   model info JSON
  GET|HEAD /ORG/NAME/resolve/REV/PATH            file, or 302 to /cdn for LFS
  GET|HEAD /cdn/ID?X-Amz-Signature=abc           LFS content, Range supported
  GET      /_stats, POST /_reset                  counters for the tests
  OPTIONS  any path                               a CORS preflight's answer

Every answer carries CORS headers, as the Hub's do, so that a page on
another origin (kvplan's, web/page.js) can read it: any origin, and the
headers a client reads exposed.

Weight files are virtual: a safetensors header followed by zeros, or a real
file padded with zeros; any byte range is generated on the fly.  See
make_repos.py for the REPOS.json format.
"""

import argparse
import hashlib
import json
import math
import os
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

GRANTED_TOKEN = "hf_granted_token"  # the one token that opens gated repos
CHUNK = 1 << 20  # bodies are written in chunks of at most 1 MiB
ZEROS = memoryview(bytes(CHUNK))
STALL_SECONDS = 120
LFS_SUFFIXES = (".safetensors", ".gguf")  # served through the "CDN", as on the Hub
FAULTS = {"no-range", "stall"}
CORS = [("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Expose-Headers", "X-Repo-Commit, X-Error-Code, Content-Range, ETag, Content-Length")]
PREFLIGHT = [("Access-Control-Allow-Methods", "GET, HEAD"),
             ("Access-Control-Allow-Headers", "Range, Authorization"),
             ("Access-Control-Max-Age", "600")]

DTYPE_SIZES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1,
    "I16": 2, "U16": 2, "I32": 4, "U32": 4, "I64": 8, "U64": 8,
}


# ---------------------------------------------------------------- contents


class Content:
    """File bytes: `head` (real bytes) followed by virtual zeros, `size` in all."""

    def __init__(self, head, size):
        self.head = head[:size]
        self.size = size

    def chunks(self, start, end):
        """Yield the bytes [start, end) in chunks of at most CHUNK bytes."""
        pos = start
        while pos < end:
            if pos < len(self.head):
                n = min(end, len(self.head), pos + CHUNK) - pos
                yield self.head[pos:pos + n]
            else:
                n = min(end - pos, CHUNK)
                yield ZEROS[:n]
            pos += n


EMPTY = Content(b"", 0)


def safetensors_header(tensors):
    """Return (8-byte length + JSON header, data size) for [name, dtype, shape]s.

    Tensors are laid out contiguously in the order given; the header is padded
    with spaces so that the data starts at a multiple of 8, like safetensors.
    """
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        if dtype not in DTYPE_SIZES:
            raise ValueError(f"unknown dtype {dtype!r} for {name}")
        if name in header:
            raise ValueError(f"duplicate tensor {name}")
        size = DTYPE_SIZES[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-(8 + len(blob)) % 8)
    return struct.pack("<Q", len(blob)) + blob, offset


def build_content(spec):
    """Turn one file entry of REPOS.json into a Content."""
    if "safetensors" in spec:
        head, data_size = safetensors_header(spec["safetensors"])
        size = len(head) + data_size
    elif "path" in spec:
        with open(spec["path"], "rb") as f:  # relative to the cwd
            head = f.read()
        size = spec.get("pad_to", len(head))
        if size < len(head):
            raise ValueError(f"pad_to {size} is below the size of {spec['path']}")
    elif "text" in spec:
        head = spec["text"].encode()
        size = len(head)
    else:
        raise ValueError(f"file entry needs safetensors, path or text: {spec}")
    if "truncate" in spec:
        size = min(size, spec["truncate"])
    return Content(head, size)


class HubFile:
    """One file of one commit."""

    def __init__(self, repo_id, path, spec):
        self.path = path
        self.content = build_content(spec)
        self.lfs = path.endswith(LFS_SUFFIXES)
        if self.lfs:
            # The Hub's LFS etag is the sha256 of the content; ours hashes the
            # description instead, so that nothing large is ever generated.
            desc = json.dumps(spec, sort_keys=True).encode() + self.content.head
            self.etag = hashlib.sha256(desc).hexdigest()
            self.cdn_id = hashlib.sha256(f"{repo_id}\0{self.etag}".encode()).hexdigest()
        else:
            # A git blob id, like the Hub's ETag for regular files.
            blob = b"blob %d\0" % self.content.size + self.content.head
            self.etag = hashlib.sha1(blob).hexdigest()
        if path.endswith(".json"):
            self.content_type = "application/json"
        else:
            self.content_type = "text/plain; charset=utf-8"


class Repo:
    def __init__(self, repo_id, spec):
        self.id = repo_id
        self.gated = bool(spec.get("gated", False))
        self.faults = set(spec.get("faults", []))
        if self.faults - FAULTS:
            raise ValueError(f"{repo_id}: unknown faults {self.faults - FAULTS}")
        self.commits = {sha: {path: HubFile(repo_id, path, fspec)
                              for path, fspec in c.get("files", {}).items()}
                        for sha, c in spec.get("commits", {}).items()}
        self.refs = dict(spec.get("refs", {}))
        for ref, sha in self.refs.items():
            if sha not in self.commits:
                raise ValueError(f"{repo_id}: ref {ref} -> unknown commit {sha}")

    def resolve(self, rev):
        """A branch/tag name or a full commit id -> commit id, or None."""
        if rev in self.refs:
            return self.refs[rev]
        return rev if rev in self.commits else None


class Hub:
    def __init__(self, repos_json):
        self.repos = {rid: Repo(rid, spec) for rid, spec in repos_json.items()}
        self.cdn = {}  # cdn id -> (repo, HubFile)
        for repo in self.repos.values():
            for files in repo.commits.values():
                for f in files.values():
                    if f.lfs:
                        self.cdn[f.cdn_id] = (repo, f)
        self.stats = Stats(self.repos)


# ------------------------------------------------------------ stats, log


class Stats:
    def __init__(self, repo_ids):
        self.lock = threading.Lock()
        self.repo_ids = list(repo_ids)
        self.reset()

    def reset(self):
        with self.lock:
            self.requests = 0
            self.bytes = 0
            self.repos = {rid: {"requests": 0, "bytes": 0} for rid in self.repo_ids}
            self.auth_seen = []

    def add_request(self):
        with self.lock:
            self.requests += 1

    def add_repo_request(self, repo_id):
        with self.lock:
            self.repos[repo_id]["requests"] += 1

    def add_bytes(self, repo_id, n):
        with self.lock:
            self.bytes += n
            if repo_id is not None:
                self.repos[repo_id]["bytes"] += n

    def saw_auth(self, value):
        with self.lock:
            if value not in self.auth_seen:
                self.auth_seen.append(value)

    def snapshot(self):
        with self.lock:
            return {"requests": self.requests, "bytes": self.bytes,
                    "repos": json.loads(json.dumps(self.repos)),
                    "auth_seen": list(self.auth_seen)}


class RequestLog:
    """With --log: one line per request, `method path range status bytes`."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1) if path else None
        self.lock = threading.Lock()

    def write(self, method, path, rng, status, nbytes):
        if self.file is None:
            return
        with self.lock:
            self.file.write(f"{method} {path} {rng or '-'} {status} {nbytes}\n")


# ------------------------------------------------------------------ ranges

UNSATISFIABLE = "unsatisfiable"


def parse_range(value, total):
    """Parse a single `bytes=A-B`, `bytes=A-` or `bytes=-N`.

    Returns (start, end) with end exclusive, UNSATISFIABLE (answer 416), or
    None when the header is to be ignored (malformed or several ranges), in
    which case the whole content is served, as HTTP says.
    """
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", value)
    if not m or m.group(1) == m.group(2) == "":
        return None
    first, last = m.groups()
    if first == "":  # suffix: the last N bytes
        n = int(last)
        if n == 0 or total == 0:
            return UNSATISFIABLE
        return max(0, total - n), total
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= total:
        return UNSATISFIABLE
    end = min(int(last) + 1, total) if last else total
    return start, end


# ----------------------------------------------------------------- handler


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response has Content-Length
    server_version = "fake-hf-hub/1.0"
    timeout = 60  # idle keep-alive connections are dropped after a minute

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):
        pass  # quiet; see RequestLog

    def do_GET(self):
        self.dispatch()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    # -- plumbing

    def dispatch(self):
        self.hub = self.server.hub
        self.repo = None  # the repo that requests and bytes are attributed to
        self.counted = True
        self.stall_body = False
        self.status = 0
        self.sent = 0
        try:
            self.discard_request_body()
            self.route()
        except (ConnectionError, TimeoutError):
            self.close_connection = True  # the client went away: stop quietly
        self.server.log.write(self.command, self.path, self.headers.get("Range"),
                              self.status, self.sent)

    def discard_request_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def attribute(self, repo):
        self.repo = repo
        self.hub.stats.add_repo_request(repo.id)

    def respond(self, status, headers=(), content=EMPTY, start=0, end=None):
        """Send status, headers, Content-Length and content[start:end]."""
        end = content.size if end is None else end
        self.status = status
        self.send_response(status)
        for name, value in CORS + list(headers):
            self.send_header(name, value)
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        if self.command == "HEAD" or start == end:
            return
        if self.stall_body:
            return self.stall()
        for chunk in content.chunks(start, end):
            self.wfile.write(chunk)
            self.sent += len(chunk)
            if self.counted:
                self.hub.stats.add_bytes(self.repo and self.repo.id, len(chunk))

    def send_json(self, status, obj, headers=()):
        body = json.dumps(obj).encode()
        headers = [("Content-Type", "application/json")] + list(headers)
        self.respond(status, headers, Content(body, len(body)))

    def send_hub_error(self, status, code, message, headers=()):
        """An error as the Hub sends it: X-Error-Code and {"error": ...}."""
        self.send_json(status, {"error": message},
                       [("X-Error-Code", code)] + list(headers))

    def send_content(self, content, headers, ranges_ok):
        """200 with everything, or 206/416 for a Range request."""
        total = content.size
        rng = self.headers.get("Range") if ranges_ok else None
        span = parse_range(rng, total) if rng else None
        headers = list(headers)
        if ranges_ok:
            headers.append(("Accept-Ranges", "bytes"))
        if span == UNSATISFIABLE:
            self.respond(416, headers + [("Content-Range", f"bytes */{total}")])
        elif span:
            start, end = span
            headers.append(("Content-Range", f"bytes {start}-{end - 1}/{total}"))
            self.respond(206, headers, content, start, end)
        else:
            self.respond(200, headers, content)

    def stall(self):
        """Headers are out: hold the body back for STALL_SECONDS, then hang up.

        Returns early when the client disconnects or the server shuts down.
        """
        self.close_connection = True
        deadline = time.monotonic() + STALL_SECONDS
        while time.monotonic() < deadline and not self.server.stopping.is_set():
            if self.client_gone():
                return

    def client_gone(self, wait=0.25):
        readable, _, _ = select.select([self.connection], [], [], wait)
        if not readable:
            return False
        try:
            data = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        if data:  # the client sent something more; keep waiting
            time.sleep(wait)
        return not data

    # -- routing

    def route(self):
        url = urlsplit(self.path)
        segs = [unquote(s) for s in url.path.split("/")[1:]]
        method = self.command
        if method == "GET" and url.path == "/_stats":
            self.counted = False
            return self.send_json(200, self.hub.stats.snapshot())
        if method == "POST" and url.path == "/_reset":
            self.counted = False
            self.hub.stats.reset()
            return self.send_json(200, {})
        if method == "OPTIONS":  # a browser's preflight for a Range request: not the client's request
            self.counted = False
            return self.respond(204, PREFLIGHT)
        self.hub.stats.add_request()
        if method in ("GET", "HEAD"):
            if segs[:2] == ["api", "models"]:
                self.note_auth()
                if len(segs) == 4:
                    return self.api_model(f"{segs[2]}/{segs[3]}", "main", url.query)
                if len(segs) >= 6 and segs[4] == "revision":
                    return self.api_model(f"{segs[2]}/{segs[3]}",
                                          "/".join(segs[5:]), url.query)
            if len(segs) >= 5 and segs[2] == "resolve":
                self.note_auth()
                return self.resolve(f"{segs[0]}/{segs[1]}", segs[3], "/".join(segs[4:]))
            if len(segs) == 2 and segs[0] == "cdn":
                return self.cdn(segs[1])
        self.send_json(404, {"error": "not found"})

    def note_auth(self):
        value = self.headers.get("Authorization")
        if value is not None:
            self.hub.stats.saw_auth(value)

    def find_repo(self, repo_id):
        """The repo, or None after answering as the Hub does to an anonymous
        client: 401 RepoNotFound (it does not reveal whether a repo exists)."""
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            url = f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"
            self.send_hub_error(401, "RepoNotFound", f"Repository Not Found for url: {url}.")
            return None
        self.attribute(repo)
        return repo

    def gate_denial(self, repo):
        """None if the request may read files of repo, else (status, message)."""
        if not repo.gated:
            return None
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):].strip() if auth.startswith("Bearer ") else ""
        if token == GRANTED_TOKEN:
            return None
        if not token:
            return 401, (f"Access to model {repo.id} is restricted. You must have access "
                         "to it and be authenticated to access it. Please log in.")
        return 403, (f"Access to model {repo.id} is restricted and you are not in the "
                     f"authorized list. Visit https://huggingface.co/{repo.id} to ask "
                     "for access.")

    # -- endpoints

    def api_model(self, repo_id, rev, query):
        """/api/models: model info; works for gated repos without a token."""
        repo = self.find_repo(repo_id)
        if repo is None:
            return
        commit = repo.resolve(rev)
        if commit is None:
            return self.send_hub_error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        blobs = parse_qs(query).get("blobs") == ["true"]
        files = repo.commits[commit]
        info = {
            "_id": hashlib.sha1(repo.id.encode()).hexdigest()[:24],
            "id": repo.id,
            "modelId": repo.id,
            "sha": commit,
            "private": False,
            "gated": "manual" if repo.gated else False,
            "siblings": [self.sibling(files[p], blobs) for p in sorted(files)],
        }
        self.send_json(200, info)

    @staticmethod
    def sibling(f, blobs):
        entry = {"rfilename": f.path}
        if blobs:  # ?blobs=true adds sizes, as on the Hub
            entry["size"] = f.content.size
            entry["blobId"] = f.etag[:40]
            if f.lfs:
                entry["lfs"] = {"sha256": f.etag, "size": f.content.size,
                                "pointerSize": 134}
        return entry

    def resolve(self, repo_id, rev, path):
        repo = self.find_repo(repo_id)
        if repo is None:
            return
        commit = repo.resolve(rev)
        if commit is None:
            return self.send_hub_error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        commit_header = [("X-Repo-Commit", commit)]
        denial = self.gate_denial(repo)
        if denial:
            status, message = denial
            return self.send_hub_error(status, "GatedRepo", message, commit_header)
        f = repo.commits[commit].get(path)
        if f is None:
            return self.send_hub_error(404, "EntryNotFound", "Entry not found", commit_header)
        if f.lfs:
            return self.redirect_to_cdn(f, commit)
        self.stall_body = "stall" in repo.faults
        headers = commit_header + [("ETag", f'"{f.etag}"'),
                                   ("Content-Type", f.content_type)]
        self.send_content(f.content, headers, ranges_ok="no-range" not in repo.faults)

    def redirect_to_cdn(self, f, commit):
        """LFS files: the Hub answers 302 to a signed CDN URL, and tells the
        real etag and size in X-Linked-Etag and X-Linked-Size."""
        port = self.server.server_address[1]
        self.respond(302, [
            ("Location", f"http://127.0.0.1:{port}/cdn/{f.cdn_id}?X-Amz-Signature=abc"),
            ("X-Repo-Commit", commit),
            ("X-Linked-Etag", f'"{f.etag}"'),
            ("X-Linked-Size", str(f.content.size)),
            ("ETag", f'"{f.etag}"'),
        ])

    def cdn(self, cdn_id):
        """The CDN: the URL is the credential, so Authorization is ignored."""
        entry = self.hub.cdn.get(cdn_id)
        if entry is None:
            return self.send_json(404, {"error": "not found"})
        repo, f = entry
        self.attribute(repo)
        self.stall_body = "stall" in repo.faults
        headers = [("ETag", f'"{f.etag}"'), ("Content-Type", "application/octet-stream")]
        self.send_content(f.content, headers, ranges_ok="no-range" not in repo.faults)


class HubServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # a client hanging up is no error
        super().handle_error(request, client_address)


# -------------------------------------------------------------------- main


def write_port_file(path, port):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="fake Hugging Face Hub for tests")
    ap.add_argument("--repos", required=True, help="REPOS.json")
    ap.add_argument("--port-file", required=True, help="where to write the port")
    ap.add_argument("--log", help="append one line per request here")
    args = ap.parse_args()

    with open(args.repos) as f:
        hub = Hub(json.load(f))
    server = HubServer(("127.0.0.1", 0), HubHandler)  # listening from here on
    server.hub = hub
    server.log = RequestLog(args.log)
    server.stopping = threading.Event()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True)
    thread.start()
    write_port_file(args.port_file, server.server_address[1])
    while not stop.wait(0.5):
        pass
    server.stopping.set()  # ends stalls
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
