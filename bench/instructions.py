#!/usr/bin/env python3
"""Redis instructions per task, per transition script: the hot path of `orq bench` (enqueue in
batches, lease, complete_batch) replayed against a private redis-server running under
`valgrind --tool=callgrind`, which counts the instructions Redis executes. Unlike a timing,
the count repeats to within a fraction of a percent whatever else the machine is doing, so it
can judge a lever of a few percent on a shared, noisy machine (docs/measurements.md).

    python3 bench/instructions.py [--tasks 20000] [--batch 1000] [--lease 50] [--tenants 1]
        [--eval] [--redis-server PATH] [--json FILE]

Phases, each measured on its own (the counters are zeroed before and dumped after):
  enqueue   --tasks tasks in calls of --batch (payload {}, type noop, priorities 0..9 in turn,
            spread over --tenants tenants; every other setting at its default: the packed
            settings value '', as the client sends it);
  lease     the queued tasks, --lease per call (the worker's arguments);
  complete  the leased tasks, complete_batch calls of --lease items (result null).
With --refill, lease and complete are one phase, as a worker pool whose completions refill its
slots runs them: one lease call, then complete_batch calls that each complete the previous
call's tasks and lease --lease more (the last one only completes).
Prints one line per phase: calls, instructions per call, per task; then the sum per task.
The scripts are called as orq calls them, as functions of its Redis Functions library (FCALL;
with --eval, by EVALSHA of each script's own source), read from lua/scripts and lua/scripts/lib
and assembled as orq-lua does, so a change to a script is measured without building orq itself. Needs valgrind (callgrind_control) and redis-server.
"""

import argparse
import glob
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUFFIXES = ["task:", "ready:", "tenants", "scheduled", "leases", "dead", "completed",
            "cancelled", "idem:", "tenant:", "stats", "events", "known_tenants", "config",
            "parked", "workers"]
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


# Values per leased task in a lease reply, read from where it is written once
# (orq_lua::facts::LEASED_ENTRY_LEN).
LEASED_ENTRY_LEN = int(re.search(
    r"pub const LEASED_ENTRY_LEN: u64 = (\d+);",
    open(os.path.join(ROOT, "lua", "src", "facts.rs")).read()).group(1))


def leased_tasks(tasks):
    """A lease reply's flat array of leased tasks, one list per task (lua/scripts/lease.lua)."""
    return [tasks[i:i + LEASED_ENTRY_LEN] for i in range(0, len(tasks), LEASED_ENTRY_LEN)]


def leased_id(task):
    """The id of one task of a lease reply (one list of `leased_tasks`): its fields are a flat
    array, or one string of names and values joined by NUL bytes (lua/scripts/lease.lua)."""
    flat = task[1] if isinstance(task[1], list) else task[1].split(b"\0")
    return dict(zip(flat[0::2], flat[1::2]))[b"id"]


def source(name):
    """The source orq sends for script `name` (the generated prelude, the lib files it uses, the script), as
    the orq-lua crate builds it: `cargo run -p orq-lua --example source -- NAME`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run(
        ["cargo", "run", "-q", "-p", "orq-lua", "--example", "source", "--", name],
        cwd=root, check=True, capture_output=True, text=True).stdout


def library():
    """orq's Redis Functions library (`cargo run -p orq-lua --example source -- --library`)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run(
        ["cargo", "run", "-q", "-p", "orq-lua", "--example", "source", "--", "--library"],
        cwd=root, check=True, capture_output=True, text=True).stdout


class Resp:
    """A minimal RESP2 client: enough for EVALSHA, SCRIPT LOAD, PING and SHUTDOWN."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self.read()

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def read(self):
        l = self.line()
        kind, rest = l[:1], l[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(1 << 20)
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("bad reply %r" % l)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ulid(ms, rng):
    t = "".join(CROCKFORD[(ms >> (5 * (9 - i))) & 31] for i in range(10))
    return t + "".join(rng.choice(CROCKFORD) for _ in range(16))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=20000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--lease", type=int, default=50, help="tasks per lease and complete_batch call")
    p.add_argument("--tenants", type=int, default=1)
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--keep", help="copy each phase's callgrind file here (for callgrind_annotate)")
    p.add_argument("--refill", action="store_true",
                   help="lease with the completions (complete_batch with a lease), as a pool "
                        "serving one queue does")
    p.add_argument("--eval", action="store_true",
                   help="call the scripts by EVALSHA instead of as functions of orq's library "
                        "(FCALL), the two designs of docs/design-notes.md note 44")
    p.add_argument("--full-args", action="store_true",
                   help="send every enqueue setting with its value (packed), as clients before "
                        "73176ca sent them")
    a = p.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is required (Debian: apt-get install valgrind)")
    if not 1 <= a.batch <= 1000 or not 1 <= a.lease <= 100 or a.tasks < 1 or a.tenants < 1:
        sys.exit("--batch 1..1000, --lease 1..100, --tasks and --tenants >= 1")

    work = tempfile.mkdtemp(prefix="orq-instr-")
    port = free_port()
    out = os.path.join(work, "callgrind.out")
    vg = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", a.redis_server,
         "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = None
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                r = Resp(port)
                if r.call("PING") == "PONG":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            sys.exit("redis-server under valgrind did not answer within 120 s")
        sha = {s: r.call("SCRIPT", "LOAD", source(s)).decode()
               for s in ("enqueue", "lease", "complete_batch")}
        keys = [f"orq:{{bench}}:{s}" for s in SUFFIXES]
        rng = random.Random(7)
        dumps = [0]

        lib = None if a.eval else r.call("FUNCTION", "LOAD", library()).decode()

        def evalsha(name, argv):
            if lib:
                return r.call("FCALL", f"{lib}_{name}", len(keys), *keys, *argv)
            return r.call("EVALSHA", sha[name], len(keys), *keys, *argv)

        def measure(name, calls):
            """Run `calls` (a list of argv lists for script `name`, or a function that makes the
            calls and returns their replies), counted; returns (Ir, replies)."""
            subprocess.run(["callgrind_control", "-z", str(vg.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if callable(calls):
                replies = calls()
            else:
                replies = [evalsha(name, argv) for argv in calls]
            subprocess.run(["callgrind_control", "-d", str(vg.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            dumps[0] += 1
            path = f"{out}.{dumps[0]}"
            for _ in range(100):
                if os.path.exists(path) and "totals:" in open(path).read():
                    break
                time.sleep(0.1)
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                shutil.copy(path, os.path.join(a.keep, f"{name}.callgrind"))
            m = re.search(r"^(?:totals|summary): (\d+)", open(path).read(), re.M)
            return int(m.group(1)), replies

        now = int(time.time() * 1000)
        enq = []
        k = 0
        while k < a.tasks:
            n = min(a.batch, a.tasks - k)
            argv = [n]
            for j in range(k, k + n):
                prio = j % 10
                if a.full_args:
                    settings = [prio, ",0,3,1000,2,300000,0.2,30000,,,86400000,"]
                else:
                    settings = ["" if prio == 0 else prio, ""]
                argv += [ulid(now, rng), f"t{j % a.tenants}", "noop", "{}"] + settings
            enq.append(argv)
            k += n
        results = []
        ir, _ = measure("enqueue", enq)
        results.append(("enqueue", len(enq), ir))

        if a.refill:
            def lease_argv():
                return ["w1", a.lease, "%016x" % rng.getrandbits(64), 0.5, 100, 10]

            def tokens_of(tasks, bits):
                return [(leased_id(t), f"{t[2]}-{bits}") for t in leased_tasks(tasks)]

            def refill_phase():
                argv = lease_argv()
                rep = evalsha("lease", argv)
                pending, replies = tokens_of(rep[1], argv[2]), [rep]
                leased = len(pending)
                while pending:
                    call = [86400000, 100, len(pending)]
                    for tid, tok in pending:
                        call += [tid, tok, "null"]
                    more = leased < a.tasks
                    if more:
                        extra = lease_argv()
                        call += extra
                    rep = evalsha("complete_batch", call)
                    replies.append(rep)
                    pending = tokens_of(rep[2], extra[2]) if more else []
                    leased += len(pending)
                return replies

            ir, replies = measure("complete_batch", refill_phase)
            done = sum(1 for rep in replies[1:] for it in rep[1] if it == b"completed")
            if done != a.tasks:
                sys.exit(f"completed {done} of {a.tasks} tasks")
            results.append(("complete+lease", len(replies), ir))
        else:
            lease_calls = -(-a.tasks // a.lease)
            ir, replies = measure("lease", [
                ["w1", a.lease, "%016x" % rng.getrandbits(64), 0.5, 100, 10]
                for _ in range(lease_calls)])
            leased = []
            for rep in replies:
                for task in leased_tasks(rep[1]):
                    leased.append(leased_id(task))
            results.append(("lease", lease_calls, ir))
            if len(leased) != a.tasks:
                sys.exit(f"leased {len(leased)} of {a.tasks} tasks")
            # Each task's lease token, read from its record (outside the counted phases).
            # (`k`: the stored name of the token, docs/design-notes.md note 26.)
            tokens = [(tid, r.call("HGET", f"orq:{{bench}}:task:{tid.decode()}", "k"))
                      for tid in leased]
            comp = []
            for i in range(0, len(tokens), a.lease):
                chunk = tokens[i:i + a.lease]
                argv = [86400000, 100, len(chunk)]
                for tid, tok in chunk:
                    argv += [tid, tok, "null"]
                comp.append(argv)
            ir, replies = measure("complete_batch", comp)
            results.append(("complete", len(comp), ir))
            done = sum(1 for rep in replies for it in rep[1] if it == b"completed")
            if done != a.tasks:
                sys.exit(f"complete_batch completed {done} of {a.tasks} tasks: leases (30 s) ran out "
                         "before their completion under valgrind and were reaped; use fewer --tasks "
                         "on a busy machine")
        total = 0
        report = {"tasks": a.tasks, "batch": a.batch, "lease": a.lease, "tenants": a.tenants,
                  "scripts": {}}
        for name, calls, ir in results:
            per_task = ir / a.tasks
            total += per_task
            report["scripts"][name] = {"calls": calls, "per_call": ir / calls,
                                       "per_task": per_task}
            print(f"{name:9} {calls:6} calls  {ir / calls:14,.0f} per call  {per_task:10,.0f} per task")
        report["per_task"] = total
        print(f"{'sum':9} {'':6}        {'':14}            {total:10,.0f} per task")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
        try:
            r.call("SHUTDOWN", "NOSAVE")
        except (ConnectionError, OSError, RuntimeError):
            pass
    finally:
        try:
            vg.wait(timeout=60)
        except subprocess.TimeoutExpired:
            vg.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
