"""The README's Python walk-through, run as written: its `worker.py` and `producer.py` blocks
(marked `<!-- example: python NAME -->`) as two processes against a live orq."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, WAIT_S, OrqServer, Procs


def examples() -> dict:
    text = (REPO / "README.md").read_text()
    found = re.findall(r"<!-- example: python (\S+) -->\n```python\n(.*?)```", text, re.S)
    return dict(found)


def test_the_readme_walk_through_runs(server: OrqServer, procs: Procs, tmp_path: Path) -> None:
    files = examples()
    assert set(files) == {"worker.py", "producer.py"}, files.keys()
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    env = dict(os.environ, ORQ_URL=server.url)
    procs.python(str(tmp_path / "worker.py"), log=tmp_path / "worker.log", env={"ORQ_URL": server.url})
    out = subprocess.run(
        [sys.executable, str(tmp_path / "producer.py")], env=env, capture_output=True, text=True, timeout=WAIT_S
    )
    assert out.returncode == 0, out.stderr + (tmp_path / "worker.log").read_text()
    assert out.stdout.strip() == "completed {'thumbnail': 'cat.png@640px', 'attempt': 1}", out
