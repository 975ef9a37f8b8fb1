"""The guides' Python blocks stay true: every ```python block of docs/*.md
and README.md compiles, and every name it takes from the package
(``zcio.X``, ``zcio.X.Y``) exists in the built package. (The two-process
examples themselves run as crates/zcio-py/examples, from scripts/test.)"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import zcio

ROOT = pathlib.Path(__file__).resolve().parents[3]


def blocks():
    guides = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    for g in guides:
        lines = g.read_text().split("\n")
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i + 1
                j = start
                while lines[j].strip() != "```":
                    j += 1
                yield f"{g.name}:{start}", "\n".join(lines[start:j])
                i = j
            i += 1


def resolve(chain: list[str]):
    """getattr along `chain` from the package, importing submodules."""
    obj = zcio
    path = "zcio"
    for name in chain:
        path += "." + name
        if not hasattr(obj, name):
            try:
                importlib.import_module(path)
            except ImportError:
                pass
        obj = getattr(obj, name)
    return obj


def zcio_chains(tree: ast.AST) -> set[tuple[str, ...]]:
    """Every `zcio.a.b…` attribute chain used (and its prefixes)."""
    out = set()
    for node in ast.walk(tree):
        chain = []
        n = node
        while isinstance(n, ast.Attribute):
            chain.append(n.attr)
            n = n.value
        if isinstance(n, ast.Name) and n.id == "zcio" and chain:
            out.add(tuple(reversed(chain)))
    return out


BLOCKS = list(blocks())


def test_the_guides_have_python_blocks():
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("where,src", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_a_guide_block_compiles_and_names_what_the_package_has(where, src):
    tree = ast.parse(src, filename=where)
    compile(tree, where, "exec")
    for chain in sorted(zcio_chains(tree)):
        # The longest prefix that is a module attribute must exist; what
        # follows may be an attribute of an instance (checked at run time).
        try:
            resolve(list(chain[:1]))
        except AttributeError:
            pytest.fail(f"{where}: zcio.{chain[0]} does not exist")
        obj = resolve(list(chain[:1]))
        if isinstance(obj, type(zcio)) and len(chain) > 1:
            try:
                resolve(list(chain[:2]))
            except AttributeError:
                pytest.fail(f"{where}: zcio.{'.'.join(chain[:2])} does not exist")


def test_the_check_finds_a_name_the_package_lacks():
    chains = zcio_chains(ast.parse("x = zcio.Channel.connect\ny = zcio.NoSuchThing()"))
    assert {("Channel", "connect"), ("NoSuchThing",)} <= chains
    assert resolve(["Channel"]) is zcio.Channel
    with pytest.raises(AttributeError):
        resolve(["NoSuchThing"])


def test_the_two_process_example_of_the_python_guide_runs(tmp_path):
    """python.md's receiver.py and sender.py, as written (only the socket
    path changed), each in its own process."""
    import subprocess
    import sys

    found = {where: src for where, src in BLOCKS if where.startswith("python.md")}
    recv = next(s for s in found.values() if s.startswith("# receiver.py"))
    send = next(s for s in found.values() if s.startswith("# sender.py"))
    sock = str(tmp_path / "demo.sock")
    files = []
    for name, src in (("receiver.py", recv), ("sender.py", send)):
        f = tmp_path / name
        f.write_text(src.replace("/tmp/demo.sock", sock))
        files.append(f)
    r = subprocess.Popen([sys.executable, str(files[0])], stdout=subprocess.PIPE, text=True)
    s = subprocess.run([sys.executable, str(files[1])], timeout=60)
    out, _ = r.communicate(timeout=60)
    assert s.returncode == 0
    assert r.returncode == 0
    assert "(1000000,) float32" in out and "b'hello'" in out, out
    assert "(1080, 1920, 3) [42 42 42]" in out, out
