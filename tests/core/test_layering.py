"""The house's layering, checked over the source (issue 29): which part of ``nexagauge`` may import which.

Data flows one way (SDK -> Kafka -> online -> graph -> nodes -> emit), and the imports follow it:

- ``nexagauge/__init__.py`` and ``nexagauge.sdk`` import nothing of ``nexagauge`` outside ``sdk``
  (``import nexagauge`` stays stdlib + OpenTelemetry; imports under ``if TYPE_CHECKING:`` never run
  and are allowed there, the lazy ``_LAZY`` table is strings, not imports);
- ``judge`` imports no ``online``/``emit``/``cli``; ``graph``/``nodes`` neither;
- ``schema``/``text``/``io`` import no ``graph``/``nodes``/``judge``/``online``/``emit``/``cli``;
- inside ``online``: ``online.ingest`` imports nothing else of ``online``, ``online.delivery`` only
  ``online.ingest``, ``online.conversations`` only ``online.ingest`` and ``online.delivery``;
- ``judge.llm`` and ``judge.local`` do not import each other.

Every import counts, at any depth: module level, inside functions (lazy), relative ones, and
``importlib.import_module("...")`` with a literal name. The checker reads files with :mod:`ast`,
it imports nothing it checks. Its own tests build a small tree under ``tmp_path``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nexagauge

ROOT = Path(nexagauge.__file__).parent


@dataclass(frozen=True)
class Rule:
    """Modules ``modules`` (exact names) and ``packages`` (and everything below them) may not
    import anything under ``forbidden`` unless it is also under ``allowed``.

    ``runtime_only``: imports under ``if TYPE_CHECKING:`` are not counted (for rules about what
    an ``import`` loads, not about design).
    """

    why: str
    forbidden: tuple[str, ...]
    packages: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    runtime_only: bool = False

    def applies_to(self, module: str) -> bool:
        return module in self.modules or any(_under(module, p) for p in self.packages)

    def forbids(self, target: str) -> bool:
        return any(_under(target, f) for f in self.forbidden) and not any(
            _under(target, a) for a in self.allowed
        )


def _under(name: str, prefix: str) -> bool:
    """``name`` is ``prefix`` or a module below it (dotted boundaries: ``a.bc`` is not under ``a.b``)."""
    return name == prefix or name.startswith(prefix + ".")


_EVALUATOR = ("online", "emit", "cli")
_ABOVE_DATA = ("graph", "nodes", "judge", *_EVALUATOR)


def house_rules(pkg: str = "nexagauge") -> tuple[Rule, ...]:
    """The rules of the module docstring for the package named ``pkg``."""

    def q(*names: str) -> tuple[str, ...]:
        return tuple(f"{pkg}.{n}" for n in names)

    return (
        Rule(
            "the SDK path (import nexagauge, nexagauge.sdk) loads nothing of the evaluator",
            forbidden=(pkg,),
            modules=(pkg,),
            packages=q("sdk"),
            allowed=q("sdk"),
            runtime_only=True,
        ),
        Rule("judge does not import online, emit or cli", q(*_EVALUATOR), packages=q("judge")),
        Rule(
            "graph and nodes do not import online, emit or cli",
            q(*_EVALUATOR),
            packages=q("graph", "nodes"),
        ),
        Rule(
            "schema, text and io import nothing above them",
            q(*_ABOVE_DATA),
            packages=q("schema", "text", "io"),
        ),
        Rule(
            "online.ingest imports nothing else of online",
            q("online"),
            packages=q("online.ingest"),
            allowed=q("online.ingest"),
        ),
        Rule(
            "online.delivery imports only online.ingest of online",
            q("online"),
            packages=q("online.delivery"),
            allowed=q("online.delivery", "online.ingest"),
        ),
        Rule(
            "online.conversations imports only online.ingest and online.delivery of online",
            q("online"),
            packages=q("online.conversations"),
            allowed=q("online.conversations", "online.ingest", "online.delivery"),
        ),
        Rule("judge.llm does not import judge.local", q("judge.local"), packages=q("judge.llm")),
        Rule("judge.local does not import judge.llm", q("judge.llm"), packages=q("judge.local")),
    )


@dataclass(frozen=True)
class Import:
    """One import statement's target, as a dotted module name."""

    module: str
    path: Path
    line: int
    target: str
    type_only: bool


@dataclass(frozen=True)
class Violation:
    imp: Import
    rule: Rule

    def __str__(self) -> str:
        i = self.imp
        return f"{i.module} ({i.path}:{i.line}) imports {i.target}: forbidden, {self.rule.why}"


def modules_of(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``: dotted name -> file (a package is its __init__)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node below ``node``, with whether it sits in the body of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        yield child, type_only
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, True
                yield from _walk(stmt, True)
            for stmt in child.orelse:
                yield stmt, type_only
                yield from _walk(stmt, type_only)
        else:
            yield from _walk(child, type_only)


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[Import]:
    """The modules ``module`` (file ``path``) imports, resolved against the ``known`` modules.

    ``from a.b import c`` targets ``a.b.c`` when that is a module, else ``a.b``.
    """
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node, type_only in _walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, path, line, alias.name, type_only)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield Import(module, path, line, sub if sub in known else base, type_only)
        elif isinstance(node, ast.Call) and _is_import_module(node.func):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield Import(module, path, line, first.value, type_only)


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )


def violations(root: Path, rules: tuple[Rule, ...]) -> list[Violation]:
    """Every import under the package at ``root`` that one of ``rules`` forbids."""
    mods = modules_of(root)
    known = set(mods)
    found: list[Violation] = []
    for module, path in mods.items():
        applicable = [r for r in rules if r.applies_to(module)]
        if not applicable:
            continue
        for imp in imports_of(module, path, known):
            for rule in applicable:
                if rule.forbids(imp.target) and not (rule.runtime_only and imp.type_only):
                    found.append(Violation(imp, rule))
    return found


# ------------------------------------------------------------------------------------------------
# the house itself


def test_nexagauge_keeps_its_layering() -> None:
    found = violations(ROOT, house_rules())
    assert not found, "layering broken:\n" + "\n".join(map(str, found))


def test_the_checker_reads_the_real_tree() -> None:
    """Guards the guard: the walk sees the sub-packages and real cross-package imports."""
    mods = modules_of(ROOT)
    assert {
        "nexagauge",
        "nexagauge.sdk",
        "nexagauge.online.ingest",
        "nexagauge.judge.local",
    } <= set(mods)
    targets = {i.target for i in imports_of("nexagauge", mods["nexagauge"], set(mods))}
    assert "nexagauge.sdk" in targets
    every = [i for m, p in mods.items() for i in imports_of(m, p, set(mods))]
    assert any(
        i.module.startswith("nexagauge.online") and i.target.startswith("nexagauge.graph")
        for i in every
    )


# ------------------------------------------------------------------------------------------------
# the checker, on a synthetic tree


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "nexagauge"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return root


def _found(tmp_path: Path, files: dict[str, str]) -> list[str]:
    return [str(v) for v in violations(_tree(tmp_path, files), house_rules())]


def test_checker_names_module_line_and_target_of_a_lazy_import(tmp_path: Path) -> None:
    found = _found(
        tmp_path,
        {
            "online/stage.py": "X = 1\n",
            "judge/base.py": "import os\n\n\ndef late():\n    from nexagauge.online.stage import X\n    return X\n",
        },
    )
    assert len(found) == 1
    msg = found[0]
    assert msg.startswith("nexagauge.judge.base (")
    assert "base.py:5)" in msg
    assert "imports nexagauge.online.stage" in msg
    assert "judge does not import online, emit or cli" in msg


def test_checker_resolves_relative_imports_and_import_module(tmp_path: Path) -> None:
    found = _found(
        tmp_path,
        {
            "judge/llm/client.py": "from ..local import judge\n",
            "judge/local/judge.py": "import importlib\nm = importlib.import_module('nexagauge.emit.spans')\n",
            "emit/spans.py": "",
        },
    )
    assert sorted(found) == sorted(
        [
            f"nexagauge.judge.llm.client ({tmp_path}/nexagauge/judge/llm/client.py:1) imports "
            "nexagauge.judge.local.judge: forbidden, judge.llm does not import judge.local",
            f"nexagauge.judge.local.judge ({tmp_path}/nexagauge/judge/local/judge.py:2) imports "
            "nexagauge.emit.spans: forbidden, judge does not import online, emit or cli",
        ]
    )


def test_checker_online_sub_packages_allow_only_what_is_below(tmp_path: Path) -> None:
    ok = {
        "online/ingest/decode.py": "from nexagauge.schema import case\nfrom . import roles\n",
        "online/ingest/roles.py": "",
        "online/delivery/dlq.py": "from nexagauge.online.ingest import decode\n",
        "online/conversations/turns.py": "from nexagauge.online.delivery.dlq import X\nfrom nexagauge.online.ingest import roles\n",
        "online/stage.py": "from nexagauge.online.conversations import turns\n",
        "schema/case.py": "",
    }
    assert _found(tmp_path, ok) == []
    bad = {
        **ok,
        "online/ingest/decode.py": "from nexagauge.online import stage\n",
        "online/delivery/dlq.py": "from nexagauge.online.conversations.turns import T\n",
        "online/conversations/turns.py": "import nexagauge.online.stage\n",
    }
    found = _found(tmp_path / "bad", bad)
    assert [
        f.split(" (")[0] + " -> " + f.split(" imports ")[1].split(":")[0] for f in sorted(found)
    ] == [
        "nexagauge.online.conversations.turns -> nexagauge.online.stage",
        "nexagauge.online.delivery.dlq -> nexagauge.online.conversations.turns",
        "nexagauge.online.ingest.decode -> nexagauge.online.stage",
    ]


def test_checker_sdk_rule_skips_only_type_checking_imports(tmp_path: Path) -> None:
    files = {
        "__init__.py": (
            "from typing import TYPE_CHECKING\nfrom nexagauge.sdk import trace\n"
            "if TYPE_CHECKING:\n    from nexagauge.online.service import S\n"
        ),
        "sdk/__init__.py": "trace = 1\n",
        "online/service.py": "S = 1\n",
        "text/words.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nexagauge.graph import node\n",
        "graph/node.py": "",
    }
    found = _found(tmp_path, files)
    # the type-only import of text -> graph still counts: it is a design dependency
    assert (
        len(found) == 1
        and found[0].startswith("nexagauge.text.words (")
        and "graph.node" in found[0]
    )
    files["sdk/decorator.py"] = "def f():\n    import nexagauge.settings\n"
    files["settings.py"] = ""
    found = _found(tmp_path / "again", files)
    assert any(
        f.startswith("nexagauge.sdk.decorator (") and "imports nexagauge.settings" in f
        for f in found
    )


def test_dotted_prefixes_respect_boundaries() -> None:
    assert _under("nexagauge.online.ingest.roles", "nexagauge.online.ingest")
    assert not _under("nexagauge.online.ingestion", "nexagauge.online.ingest")
