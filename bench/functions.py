#!/usr/bin/env python3
"""Redis Functions or EVALSHA: what each call pays Redis, in instructions (callgrind), for the
decision of issue 22 (docs/design-notes.md, note 44).

    python3 bench/functions.py [--calls 2000] [--redis-server PATH] [--json FILE]

A script sent by EVALSHA runs its whole chunk on every call: the generated prelude and every
shared helper it includes are defined again (closures, tables) before its body runs. A Redis
Function library runs its top level once, at FUNCTION LOAD; an FCALL runs only the function.
So the most Functions can save per call is the top-level cost of a script's helpers, and what
they cost or save in dispatch. Measured against a private redis-server under
`valgrind --tool=callgrind` (the counts repeat whatever else the machine does):

  eval_noop    EVALSHA of `return 0` with the 16 queue keys: EVAL's dispatch
  fcall_noop   FCALL of a function that returns 0, same keys: FCALL's dispatch
  top:<name>   EVALSHA of script <name>'s source with its body replaced by `return 0`, less
               eval_noop: the per-call top-level cost Functions would save for <name>
  call:<name>  one real single-task call by EVALSHA (enqueue of one task, lease of one,
               heartbeat, get, complete_batch of one; lease_idle: a lease that finds nothing
               ready or due, an idle worker's poll)
  fcall:<name> the same calls as FCALLs of orq's function library (`FUNCTION LOAD`ed from
               `source --library`), on a second queue; `library` says whether it loaded

The sources are read as orq-lua builds them (`cargo run -p orq-lua --example source`).
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

from instructions import Resp, SUFFIXES, free_port, leased_id, leased_tasks, library, source, ulid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["enqueue", "lease", "complete_batch", "heartbeat", "get"]


class Counted:
    """A private redis-server under callgrind whose instruction count can be read per phase."""

    def __init__(self, redis_server):
        self.work = tempfile.mkdtemp(prefix="orq-functions-")
        self.port = free_port()
        self.out = os.path.join(self.work, "callgrind.out")
        self.dumps = 0
        self.vg = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}", redis_server,
             "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.work],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                self.r = Resp(self.port)
                if self.r.call("PING") == "PONG":
                    return
            except OSError:
                time.sleep(0.5)
        self.close()
        sys.exit("redis-server under valgrind did not answer within 120 s")

    def _control(self, flag):
        subprocess.run(["callgrind_control", flag, str(self.vg.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def count(self, run):
        """Instructions Redis executes while `run()` runs."""
        self._control("-z")
        run()
        self._control("-d")
        self.dumps += 1
        path = f"{self.out}.{self.dumps}"
        for _ in range(100):
            if os.path.exists(path) and "totals:" in open(path).read():
                break
            time.sleep(0.1)
        return int(re.search(r"^(?:totals|summary): (\d+)", open(path).read(), re.M).group(1))

    def close(self):
        try:
            self.r.call("SHUTDOWN", "NOSAVE")
        except (AttributeError, ConnectionError, OSError, RuntimeError):
            pass
        try:
            self.vg.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.vg.kill()
        shutil.rmtree(self.work, ignore_errors=True)


def body(name):
    with open(os.path.join(ROOT, "lua", "scripts", f"{name}.lua")) as f:
        return f.read()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="calls per measured phase")
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is required (Debian: apt-get install valgrind)")
    keys = [f"orq:{{bench}}:{s}" for s in SUFFIXES]
    c = Counted(a.redis_server)
    fig = {}
    try:
        r = c.r
        n = a.calls
        noop = r.call("SCRIPT", "LOAD", "return 0").decode()
        fig["eval_noop"] = c.count(lambda: [r.call("EVALSHA", noop, 16, *keys) for _ in range(n)]) / n
        r.call("FUNCTION", "LOAD", "REPLACE",
               "#!lua name=orqbench\nredis.register_function('orqbench_noop', "
               "function(keys, args) return 0 end)")
        fig["fcall_noop"] = c.count(
            lambda: [r.call("FCALL", "orqbench_noop", 16, *keys) for _ in range(n)]) / n
        for name in SCRIPTS:
            full, own = source(name), body(name)
            if not full.endswith(own):
                sys.exit(f"{name}: the source does not end with lua/scripts/{name}.lua")
            top = r.call("SCRIPT", "LOAD", full[:-len(own)] + "return 0").decode()
            ir = c.count(lambda: [r.call("EVALSHA", top, 16, *keys) for _ in range(n)]) / n
            fig[f"top:{name}"] = ir - fig["eval_noop"]

        sha = {s: r.call("SCRIPT", "LOAD", source(s)).decode() for s in SCRIPTS}
        rng = random.Random(7)
        now = int(time.time() * 1000)

        def single_calls(prefix, call, queue):
            """The single-task calls on `queue`, each script run by `call(name, keys, argv)`."""
            qkeys = [f"orq:{{{queue}}}:{s}" for s in SUFFIXES]
            ids = [ulid(now, rng) for _ in range(n)]

            def run(name, argvs):
                return [call(name, qkeys, argv) for argv in argvs]

            fig[f"{prefix}:enqueue"] = c.count(
                lambda: run("enqueue", [[1, i, "t0", "noop", "{}", "", ""] for i in ids])) / n
            leased = []

            def lease():
                for rep in run("lease", [["w1", 1, "%016x" % rng.getrandbits(64), 0.5, 100, 10]
                                         for _ in range(n)]):
                    leased.append(leased_id(leased_tasks(rep[1])[0]))
            fig[f"{prefix}:lease"] = c.count(lease) / n
            tokens = [(t, r.call("HGET", f"orq:{{{queue}}}:task:{t.decode()}", "k"))
                      for t in leased]
            fig[f"{prefix}:heartbeat"] = c.count(
                lambda: run("heartbeat", [[t, k, 30000] for t, k in tokens])) / n
            fig[f"{prefix}:get"] = c.count(lambda: run("get", [[t] for t, _ in tokens])) / n
            fig[f"{prefix}:complete_batch"] = c.count(
                lambda: run("complete_batch",
                            [[86400000, 100, 1, t, k, "null"] for t, k in tokens])) / n
            # Nothing ready, nothing due: what an idle worker's poll costs.
            fig[f"{prefix}:lease_idle"] = c.count(
                lambda: run("lease", [["w1", 1, "%016x" % rng.getrandbits(64), 0.5, 100, 10]
                                      for _ in range(n)])) / n

        single_calls("call", lambda name, k, argv: r.call("EVALSHA", sha[name], 16, *k, *argv),
                     "bench")
        try:
            lib = r.call("FUNCTION", "LOAD", "REPLACE", library()).decode()
        except RuntimeError as e:
            fig["library"] = f"not loaded: {e}"
        else:
            fig["library"] = lib
            single_calls("fcall",
                         lambda name, k, argv: r.call("FCALL", f"{lib}_{name}", 16, *k, *argv),
                         "bench2")
    finally:
        c.close()
    for k, v in fig.items():
        if isinstance(v, str):
            print(f"{k:22} {v}")
        else:
            print(f"{k:22} {v:12,.0f} instructions per call")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"calls": a.calls, "per_call": fig}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
