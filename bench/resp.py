"""A minimal Redis client for the bench scripts (standard library only): one connection, RESP2
commands one at a time or pipelined. Enough to read INFO, counters and the engines' records; not a
general client (no TLS, no AUTH beyond a password in the URL, no RESP3)."""

import socket
import urllib.parse


class RedisError(Exception):
    """An error reply."""


class Redis:
    """One connection to the Redis at `url` (redis://[:password@]host:port/[db])."""

    def __init__(self, url, timeout=60):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379),
                                             timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rf = self.sock.makefile("rb")
        if u.password:
            self.call("AUTH", urllib.parse.unquote(u.password))
        db = (u.path or "/").strip("/")
        if db and db != "0":
            self.call("SELECT", db)

    def close(self):
        self.rf.close()
        self.sock.close()

    @staticmethod
    def _encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _read(self):
        line = self.rf.readline()
        if not line:
            raise ConnectionError("Redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.rf.read(n + 2)
            return data[:-2].decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise ConnectionError(f"unexpected reply {line!r}")

    def call(self, *args):
        """One command; raises RedisError on an error reply."""
        r = self.pipeline([args])[0]
        if isinstance(r, RedisError):
            raise r
        return r

    def pipeline(self, commands, chunk=1000):
        """Many commands, sent `chunk` at a time; their replies in order (errors as RedisError
        values, not raised)."""
        replies = []
        for i in range(0, len(commands), chunk):
            part = commands[i:i + chunk]
            self.sock.sendall(b"".join(self._encode(c) for c in part))
            replies.extend(self._read() for _ in part)
        return replies

    def info(self, section):
        """INFO `section` as a dict of its `name:value` lines (values as text)."""
        out = {}
        for line in self.call("INFO", section).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def scan_delete(self, pattern):
        """UNLINK every key matching `pattern` (SCAN, so a shared Redis is not blocked)."""
        cursor = "0"
        n = 0
        while True:
            cursor, keys = self.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            if keys:
                n += self.call("UNLINK", *keys)
            if cursor == "0":
                return n
