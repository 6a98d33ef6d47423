"""bench/llama_cpp_greedy_gate.py against stand-ins for `superkernel run` and `llama-server`: equal
ids pass, the first differing step is named, a server that dies is reported."""

import os
import stat
import subprocess
import sys
import textwrap

_GATE = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "llama_cpp_greedy_gate.py")

# `superkernel run CONFIG ... --prompt IDS --tokens N`: N ids, the prompt's first id counting up.
_OURS = textwrap.dedent("""\
    #!{python}
    import sys
    args = sys.argv[1:]
    first = int(args[args.index("--prompt") + 1].split(",")[0])
    n = int(args[args.index("--tokens") + 1])
    assert "checkpoint: " in open(args[1]).read()
    print("sequence 0 tokens: " + " ".join(str(first + i) for i in range(n)))
    """)

# llama-server: /health, then /completion answering the prompt's first id counting up, with the
# id at step {wrong} (if any) off by one; {die}: exit before listening.
_SERVER = textwrap.dedent("""\
    #!{python}
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    if {die}:
        print("error: failed to load model", file=sys.stderr)
        sys.exit(1)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass
        def reply(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        def do_GET(self):
            self.reply({{"status": "ok"}})
        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert req["temperature"] == 0.0 and req["return_tokens"]
            ids = [req["prompt"][0] + i for i in range(req["n_predict"])]
            if {wrong} >= 0:
                ids[{wrong}] += 1
            self.reply({{"tokens": ids}})
    HTTPServer(("127.0.0.1", port), H).serve_forever()
    """)


def _script(path, text, **fields):
    with open(path, "w") as f:
        f.write(text.format(python=sys.executable, **fields))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return str(path)


def _gate(tmp_path, wrong=-1, die=False):
    cli = _script(tmp_path / "superkernel", _OURS)
    server = _script(tmp_path / "llama-server", _SERVER, wrong=wrong, die=die)
    cmd = [sys.executable, _GATE, "--checkpoint", str(tmp_path), "--llama-server", server, "--gguf", "x.gguf",
           "--cli", cli, "--prompt", "5,6,7", "--tokens", "8"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_equal_ids_pass(tmp_path):
    done = _gate(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 greedy ids equal" in done.stdout
    assert "superkernel: 5 6 7 8 9 10 11 12" in done.stdout


def test_differing_ids_name_the_first_step(tmp_path):
    done = _gate(tmp_path, wrong=3)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the ids differ from step 3" in done.stdout


def test_a_server_that_exits_is_reported(tmp_path):
    done = _gate(tmp_path, die=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "llama-server exited 1" in done.stderr and "failed to load model" in done.stderr
