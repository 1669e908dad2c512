#!/usr/bin/env python3
"""tests/web/run.py -- make check-web: the page of build/web in a real browser.

Serves WEBDIR on 127.0.0.1 (a free port), loads every deployment of
tests/web/deployments.txt in Debian's chromium (headless, driven over the
DevTools protocol on a pipe; the first one also from file://) and compares what the page shows with the native
kvplan ($KVPLAN_BIN) run on the argv the table gives: the page must have run
that argv, its #kvplan-json must equal the native stdout byte for byte, and an
input error must show the native stderr. Also checks that page.js's table of
URL keys is `kvplan fit`'s deployment options, and that a form edit and a
dropped file rewrite the URL to a link that gives the same answer. A query
with $HUB names the test Hub (tests/hub/server.py, started here): the page
fetches from it, the native kvplan (kvplan-hub beside it) too, and the link
the page rewrites must pin the commit and give the same answer. Exit 0 when
all agree.

    run.py [--screenshot PNG] WEBDIR   (--screenshot: only write docs/web.png)
"""
import base64
import functools
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHROMIUM = os.environ.get("CHROMIUM", "chromium")
KVPLAN = os.path.abspath(os.environ.get("KVPLAN_BIN", os.path.join(ROOT, "build/rel/kvplan")))
FIT_OWN = {"--max-gpus", "--explain", "--format", "--si", "--emit", "--refresh", "--engine-args"}  # fit's options that are no deployment setting
HUB_PLACEHOLDER = "$HUB"  # in a query of deployments.txt: hub=$HUB, the test Hub's address


class Browser:
    """Debian's chromium, headless, driven over the DevTools protocol on a pipe
    (--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4)."""

    def __init__(self, size="1100,1400"):
        self.prof = tempfile.TemporaryDirectory(prefix="kvplan-web-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        cmd = [CHROMIUM, "--headless=new", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
               "--disable-dev-shm-usage", "--remote-debugging-pipe", f"--user-data-dir={self.prof.name}",
               f"--window-size={size}", "about:blank"]
        if os.geteuid() == 0:
            cmd.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox

        def fds():  # the pipe's ends onto 3 and 4 (through copies: either may be 3 or 4 already)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=fds,
                                     pass_fds=(3, 4, to_chrome_r, from_chrome_w))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.reader = os.fdopen(self.from_chrome, "rb")
        self.next_id = 0
        self.buf = b""

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = self.reader.read1(1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def load(self, url):
        """Open url in a new tab and wait for the page's answer; (target, session, status)."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.navigate", session, url=url)
        return target, session, self.wait(session)

    def wait(self, session, timeout=60):
        """The page's status once it has answered: ok or error (#status's data-done)."""
        end = time.time() + timeout
        while time.time() < end:
            status = self.eval(session, "(document.getElementById('status') || {dataset: {}}).dataset.done || ''")
            if status:
                return status
            time.sleep(0.05)
        return "(the page did not finish in %d s)" % timeout

    def eval(self, session, expr):
        r = self.call("Runtime.evaluate", session, expression=expr, returnByValue=True)
        return r["result"].get("value")

    def close_tab(self, target):
        self.call("Target.closeTarget", targetId=target)

    def quit(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        self.proc.wait(timeout=30)
        self.prof.cleanup()


def text(browser, session, ident):
    """The text of the element with id ident (None when there is none)."""
    return browser.eval(session, "(e => e && e.textContent)(document.getElementById(%s))" % json.dumps(ident))


def read_table():
    rows = []
    with open(os.path.join(HERE, "deployments.txt"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            cols = [c.strip() for c in line.split(" | ")]
            if cols[0] not in ("json", "error", "page") or len(cols) not in (3, 4):
                sys.exit(f"tests/web/deployments.txt:{n}:1: expected KIND | QUERY | ARGV [| FILE]")
            if cols[0] == "json" and not cols[2].endswith(" --format json"):
                sys.exit(f"tests/web/deployments.txt:{n}:1: a json line's argv ends in --format json")
            rows.append({"line": n, "kind": cols[0], "query": cols[1], "expect": cols[2],
                         "file": cols[3] if len(cols) == 4 else None})
    return rows


GGUF_DIR = "build/web/test"  # GGUF headers made for the table: the first 64 KiB of kvplan export-gguf NAME --sparse
GGUF_HEADER = 64 << 10


def make_gguf(path):
    """tests/web's GGUF files: a header alone, as a user drops one (no weights: the page reads 64 MiB at most)."""
    name = os.path.basename(path)[:-len(".gguf")]
    os.makedirs(os.path.join(ROOT, GGUF_DIR), exist_ok=True)
    full = os.path.join(ROOT, GGUF_DIR, name + ".full.gguf")
    subprocess.run([KVPLAN, "export-gguf", name, full, "--sparse"], check=True, capture_output=True,
                   env=dict(os.environ, KVPLAN_DATADIR=os.path.join(ROOT, "models")))
    with open(full, "rb") as f, open(os.path.join(ROOT, path), "wb") as out:
        out.write(f.read(GGUF_HEADER))
    os.remove(full)


def fragment(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        data = base64.urlsafe_b64encode(f.read()).decode().rstrip("=")
    return "#file=%s:%s" % (urllib.parse.quote(os.path.basename(path)), data)


class TestHub:
    """tests/hub/server.py on 127.0.0.1 over make_repos.py's repos, as tests/hub.sh starts it, with
    test/tiny-GGUF serving a GGUF header made as make_gguf makes one (padded to its file's size)."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="kvplan-web-hub-")
        d = self.tmp.name
        full = os.path.join(d, "full.gguf")
        subprocess.run([KVPLAN, "export-gguf", "llama-3.1-8b", full, "--sparse"], check=True, capture_output=True,
                       env=dict(os.environ, KVPLAN_DATADIR=os.path.join(ROOT, "models")))
        with open(full, "rb") as f, open(os.path.join(d, "tiny.gguf"), "wb") as out:
            out.write(f.read(GGUF_HEADER))
        gguf = "%s:%d" % (os.path.join(d, "tiny.gguf"), os.path.getsize(full))
        os.remove(full)
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/hub/make_repos.py"), os.path.join(d, "repos.json"),
                        "--gguf", gguf], check=True)
        with open(os.path.join(d, "repos.json"), encoding="utf-8") as f:
            self.repos = json.load(f)
        port_file = os.path.join(d, "port")
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/hub/server.py"), "--repos",
                                      os.path.join(d, "repos.json"), "--port-file", port_file])
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.05)
        with open(port_file, encoding="utf-8") as f:
            self.endpoint = "http://127.0.0.1:%d" % int(f.read())

    def env(self):
        """The native kvplan's environment against this Hub: a cache of its own for each run (empty, as the
        page's in-memory one is at each start), no HF cache, online, no token."""
        env = dict(os.environ, HF_ENDPOINT=self.endpoint, KVPLAN_CACHE=tempfile.mkdtemp(dir=self.tmp.name),
                   HF_HUB_CACHE=os.path.join(self.tmp.name, "no-hf-cache"), HOME=self.tmp.name)
        for k in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "XDG_CACHE_HOME"):
            env.pop(k, None)
        return env

    def stats(self, reset=False):
        """The requests and bytes the Hub served since the last reset: (requests, bytes)."""
        url = self.endpoint + ("/_reset" if reset else "/_stats")
        with urllib.request.urlopen(urllib.request.Request(url, method="POST" if reset else "GET")) as r:
            got = json.load(r)
        return None if reset else (got["requests"], got["bytes"])

    def commit(self, ref):
        """The commit ref's branch resolves to ("main" unless @REV), for the pinned link."""
        repo = re.split(r"[@:]", ref)[0]
        rev = ref.split("@", 1)[1].split(":")[0] if "@" in ref else "main"
        return self.repos[repo]["refs"].get(rev, rev)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.tmp.cleanup()


def native(argv, folder=None, hub=None):
    """The native kvplan on argv, in folder (a dropped file's, as the page runs in the one it writes the file
    to); against the test Hub when hub is given."""
    cwd = os.path.join(ROOT, folder or "")
    env = dict(hub.env() if hub else os.environ, KVPLAN_DATADIR=os.path.join(ROOT, "models"))
    run = subprocess.run([KVPLAN] + argv, capture_output=True, text=True, cwd=cwd, env=env)
    run.cache = env.get("KVPLAN_CACHE")  # where a Hub file went: the page's is CACHE_DIR, /cache
    return run


def check_pin(browser, row, url, page_json, hub):
    """A Hub model's answer: the link the page rewrote names the commit (model=ORG/NAME@COMMIT, :TYPE kept),
    and opened afresh gives the same JSON. A list of failures."""
    model = shlex.split(row["expect"])[1]
    repo, typ = re.split(r"[@:]", model)[0], (":" + model.rsplit(":", 1)[1]) if ":" in model else ""
    want = "%s@%s%s" % (repo, hub.commit(model), typ)
    got = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("model", [""])[0]
    if got != want:
        return [f"after {model} resolved the link says model={got}, want {want}"]
    target, session, status = browser.load(url)
    again = text(browser, session, "kvplan-json")
    browser.close_tab(target)
    if status != "ok" or again != page_json:
        return [f"the pinned link {url[:120]} does not give the same answer (status {status})"]
    return []


def check_log_summary(j, log, summary):
    """The log box says why an engine would not start, and the summary groups its counts as the CLI does."""
    fails = []
    if j.get("refused") and j["refused"] not in log:
        fails.append(f"the log box does not say why {j['engine']} would not start: {log!r}")
    if f"{j['kv_tokens']:,} KV tokens" not in summary or f"max context {j['max_context']:,} tokens" not in summary:
        fails.append(f"the summary's counts are not grouped as the CLI's: {summary!r}")
    return fails


def check_devices(j, page):
    """llama.cpp's offload: the page's device table is the JSON's devices and host, in GiB; none otherwise."""
    host = j.get("host")
    if not host or not (host["model_layers"] or host["layers"]):
        return [] if not page else [f"a device table without offload: {page!r}"]
    gib = lambda b: "%.2f GiB" % (b / 1073741824)
    want = ["device|layers|weights|KV|compute"]
    want += ["GPU%d|%d|%s|%s|" % (i, d["model_layers"], gib(d["weights_bytes"]), gib(d["buffer_bytes"]))
             for i, d in enumerate(j["devices"])]
    want.append("host RAM|%d|%s|%s|%s" % (host["model_layers"], gib(host["weights_bytes"]), gib(host["buffer_bytes"]),
                                          gib(host["compute_bytes"])))
    return [] if page == "\n".join(want) else ["the device table differs:\n--- page\n%s\n--- JSON\n%s"
                                               % (page, "\n".join(want))]


def check_row(browser, row, base, hub):
    """One deployment: a list of failures (empty when the page agrees)."""
    on_hub = HUB_PLACEHOLDER in row["query"]
    query = row["query"].replace(HUB_PLACEHOLDER, hub.endpoint)
    url = base + "/index.html?" + query + (fragment(row["file"]) if row["file"] else "")
    if on_hub:
        hub.stats(reset=True)
    target, session, status = browser.load(url)
    if on_hub:
        row["page_stats"] = hub.stats()
    page_err = (text(browser, session, "kvplan-error") or "").strip()
    page_json = text(browser, session, "kvplan-json")
    page_explain = text(browser, session, "explain")
    page_log = text(browser, session, "log") or ""
    page_summary = text(browser, session, "summary") or ""
    page_argv = text(browser, session, "kvplan-argv") or ""
    page_launch = text(browser, session, "launch") or ""
    page_devices = browser.eval(session, "(t => t.hidden ? '' : [...t.rows].map(r => [...r.cells].map(c => "
                                "c.textContent).join('|')).join('\\n'))(document.getElementById('devices'))")
    chart = browser.eval(session, "(c => c.querySelector('svg') ? '<svg>' : c.textContent)(document.getElementById('chart'))")
    pinned_url = browser.eval(session, "location.href")
    browser.close_tab(target)
    fails = []
    if row["kind"] == "page":
        if status != "error" or row["expect"] not in page_err:
            fails.append(f"the page should refuse the URL with '{row['expect']}'; status {status}, error: {page_err!r}")
        return fails
    argv = shlex.split(row["expect"])
    ran = shlex.split(page_argv)
    if ran[1:] != argv:
        fails.append(f"the page ran {ran!r}, the table says kvplan {row['expect']}")
    folder, on = (os.path.dirname(row["file"]) if row["file"] else None), (hub if on_hub else None)
    if on_hub:
        hub.stats(reset=True)
    nat = native(argv, folder, on)
    if on_hub:
        row["native_stats"] = hub.stats()
    if row["kind"] == "json":
        if status != "ok" or nat.returncode not in (0, 1):
            fails.append(f"status {status}, native exit {nat.returncode}: {page_err or nat.stderr.strip()}")
        elif page_json is None or page_json.strip() != nat.stdout.strip():
            fails.append("#kvplan-json differs from the native stdout:\n--- page\n%s\n--- native\n%s"
                         % (page_json, nat.stdout))
        elif not fails:
            fails += check_log_summary(json.loads(nat.stdout), page_log, page_summary)
            fails += check_devices(json.loads(nat.stdout), page_devices)
        explain = native(argv[:-2] + ["--explain"], folder, on)
        if page_explain != explain.stdout:
            fails.append("the derivation differs from kvplan %s" % shlex.join(argv[:-2] + ["--explain"]))
        emit = native(argv[:-2] + ["--emit"], folder, on)  # the launch command, or why there is none
        want = emit.stderr.strip().removeprefix("kvplan: ") if emit.returncode == 2 else emit.stdout
        if emit.cache:  # a Hub GGUF's path in each one's cache: the same file
            want = want.replace(emit.cache, "/cache")
        if page_launch.strip() != want.strip():
            fails.append("the launch command differs from kvplan %s:\n--- page\n%s\n--- native\n%s"
                         % (shlex.join(argv[:-2] + ["--emit"]), page_launch, want))
        if chart != "<svg>":  # kvplan plot's chart of the same deployment
            fails.append(f"no chart: {chart!r}")
        if on_hub and not fails:
            fails += check_pin(browser, row, pinned_url, page_json, hub)
    else:
        if nat.returncode != 2 or status != "error" or page_err != nat.stderr.strip():
            fails.append(f"native exit {nat.returncode} stderr {nat.stderr.strip()!r}; page status {status} "
                         f"error {page_err!r}")
    return fails


def check_form(browser, base):
    """The form: an edit and a dropped file each update the URL, the answer is the native one
    for the new argv, and the URL opened afresh (a shared link) gives the same JSON."""
    fails = []
    with open(os.path.join(ROOT, "tests/data/hf/llama-3.1-8b.json"), encoding="utf-8") as f:
        config = f.read()
    with open(os.path.join(ROOT, "tests/data/model-folder/config.json"), encoding="utf-8") as f:
        unnamed = f.read()  # no _name_or_path: the page asks for a name
    named = os.path.join(ROOT, "build/web/test/named")
    os.makedirs(named, exist_ok=True)
    with open(os.path.join(named, "my-model.json"), "w", encoding="utf-8") as f:
        f.write(unnamed)
    name_it = ("(e => { e.value = 'my-model'; e.dispatchEvent(new Event('input', {bubbles: true})); })"
               "(document.getElementById('f-file-name'))")
    edits = [  # (what the user does, in JS; the argv it must lead to; the dropped file's folder)
        ("(e => { e.value = '2'; e.dispatchEvent(new Event('input', {bubbles: true})); })(document.getElementById('f-tp'))",
         "fit llama-3.1-8b --gpu h100 --tp 2 --context 32k --concurrency 8 --format json", None),
        ("dropFile(new File([%s], 'llama-3.1-8b.json'))" % json.dumps(config),
         "fit llama-3.1-8b.json --gpu h100 --context 32k --concurrency 8 --format json", "tests/data/hf"),
        ("dropFile(new File([%s], 'config.json')).then(() => %s)" % (json.dumps(unnamed), name_it),
         "fit ./my-model.json --gpu h100 --context 32k --concurrency 8 --format json", named),
    ]
    for action, expect, file in edits:
        target, session, status = browser.load(base + "/index.html?model=llama-3.1-8b&gpu=h100&context=32k&concurrency=8")
        browser.eval(session, "document.getElementById('status').dataset.done = ''; " + action)
        status = browser.wait(session)
        url = browser.eval(session, "location.href")
        got = text(browser, session, "kvplan-json")
        ran = shlex.split(text(browser, session, "kvplan-argv") or "")[1:]
        browser.close_tab(target)
        nat = native(shlex.split(expect), file)
        if status != "ok" or ran != shlex.split(expect) or (got or "").strip() != nat.stdout.strip():
            fails.append(f"after the edit {action[:60]}...: status {status}, ran {ran}, JSON equal to "
                         f"kvplan {expect}: {(got or '').strip() == nat.stdout.strip()}")
            continue
        target, session, status = browser.load(url)
        again = text(browser, session, "kvplan-json")
        browser.close_tab(target)
        if status != "ok" or again != got:
            fails.append(f"the URL the form wrote ({url[:120]}) does not give the same answer (status {status})")
        print("check-web: %-4s form  %-4s %s -> %s" % ("ok" if not fails else "FAIL", base.split(":")[0],
                                                      action.split("(")[0] or "edit tp", url[len(base):][:90]))
    return fails


def check_keys():
    """page.js's KEYS table against `kvplan fit --help`: the same options, the same flags without a value."""
    with open(os.path.join(ROOT, "web/page.js"), encoding="utf-8") as f:
        js = f.read()
    table = {m.group(1): bool(m.group(2)) for m in re.finditer(r"\{key: '\w+', flag: '(--[\w-]+)'[^}]*?(bool: true)?\}", js)}
    helptext = subprocess.run([KVPLAN, "fit", "--help"], capture_output=True, text=True).stdout
    fit = {m.group(1): not m.group(2) for m in re.finditer(r"^  (--[\w-]+)(?: (\S+))?\s", helptext, re.M)}
    fit = {k: v for k, v in fit.items() if k not in FIT_OWN}
    if table != fit:
        return [f"page.js's KEYS {sorted(table.items())} != kvplan fit --help's {sorted(fit.items())}"]
    return []


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(webdir):
    handler = functools.partial(QuietHandler, directory=webdir)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def screenshot(webdir, png):
    """docs/web.png: the page at a phone-and-a-half width, the answer for a hybrid model under SGLang."""
    query = "model=qwen3-next-80b-a3b&gpu=h100&tp=4&engine=sglang&context=256k&concurrency=4"
    browser = Browser(size="1100,1500")
    try:
        target, session, status = browser.load("file://" + os.path.abspath(webdir) + "/index.html?" + query)
        if status != "ok":
            sys.exit(f"web-screenshot: the page did not answer ({status})")
        shot = browser.call("Page.captureScreenshot", session, format="png")
        browser.close_tab(target)
    finally:
        browser.quit()
    with open(png, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    print(f"web-screenshot: {png}")


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--screenshot":
        return screenshot(args[2], args[1])
    if len(args) != 1:
        sys.exit(__doc__)
    webdir = args[0]
    if not shutil.which(CHROMIUM):
        sys.exit("check-web: no chromium (apt-get install chromium; .ci/deps.sh --ci installs it)")
    start = time.time()
    rows = read_table()
    for r in rows:
        if r["file"] and r["file"].startswith(GGUF_DIR + "/"):
            make_gguf(r["file"])
    srv = serve(webdir)
    hub = TestHub()
    base = "http://127.0.0.1:%d" % srv.server_address[1]
    # the first deployment once more from file://: the page works without a server
    jobs = [(r, base) for r in rows] + [(rows[0], "file://" + os.path.abspath(webdir))]
    failed = check_keys()
    for f in failed:
        print("check-web: FAIL " + f)
    browser = Browser()
    try:
        for row, where in jobs:
            fails = check_row(browser, row, where, hub)
            print("check-web: %-4s %-5s %-4s ?%s" % ("ok" if not fails else "FAIL", row["kind"], where.split(":")[0],
                                                   row["query"]))
            if "native_stats" in row:
                print("check-web:      the Hub served the page %d requests, %d bytes; the native kvplan %d, %d"
                      % (row["page_stats"] + row["native_stats"]))
            for f in fails:
                print(f"tests/web/deployments.txt:{row['line']}:1: {f}")
            failed += fails
        failed += check_form(browser, base)
    finally:
        browser.quit()
        srv.shutdown()
        hub.stop()
    n_json = sum(r["kind"] == "json" for r in rows)
    print("check-web: %d URLs (%d deployments compared with kvplan fit --format json, %d input errors) and the form's "
          "edits, %d failed, %.1f s" % (len(jobs), n_json, len(rows) - n_json, len(failed), time.time() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
