"""The native lean gate (``nexagauge/sdk/_gate.c``) gives the Python gate's verdicts.

``Scrubber.gate`` asks the C pass first when the extension is built; it answers clean / clean and
plain, or hands the texts to the Python gate (-1). These tests compare a scrubber using it with
one that does not (``_lean = None``, what an install without a C compiler runs) on random texts
and on the cases its 64-byte blocks, padded tails, grouped literals and key windows could get
wrong, and check that it never calls a text with a secret clean.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.sdk import scrub_gates
from nexagauge.sdk.scrubbing import Scrubber, ScrubRule

from .test_secret_corpus import KINDS

REPO = Path(__file__).resolve().parents[2]

native = pytest.mark.skipif(scrub_gates.lean_native is None, reason="C extension not built")


def _pair(**kwargs: object) -> tuple[Scrubber, Scrubber]:
    with_c, python = Scrubber(**kwargs), Scrubber(**kwargs)  # type: ignore[arg-type]
    python._lean = None
    return with_c, python


def _same(texts: list[str], **kwargs: object) -> int:
    with_c, python = _pair(**kwargs)
    verdict = with_c.gate(list(texts))
    assert verdict == python.gate(list(texts)), texts
    return verdict


def test_the_extension_is_built_where_a_compiler_is() -> None:
    """An install with a C compiler and Python's headers builds it (setup.py); the suite would
    otherwise test the fallback only, without saying so."""
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    if shutil.which("cc") is None or not headers:
        pytest.skip("no C compiler or no Python headers here: the Python gate is the SDK's gate")
    assert scrub_gates.lean_native is not None, "pip install -e . did not build nexagauge.sdk._gate"


_ALPHABET = st.sampled_from(
    [
        *"abcXYZ019_- .,;!?'\"\\\n\t\x01=:@/+#é€",
        "password",
        "PASSWORD",
        "assword is ",
        "PaSsWoRd",
        "://",
        "pwd",
        "pass",
        "Token",
        "secret",
        "key",
        "pin",
        "authorization",
        '"',
        " = ",
        '": "',
        "a" * 15,
        "Z" * 16,
        "ab12" * 5,
        "sk-",
        "eyJ",
        "-----BEGIN",
        "4111 1111 1111 1111",
        "bob@example.com",
        "\ud800",
    ]
)
_TEXT = st.lists(_ALPHABET, max_size=60).map("".join)


@native
@settings(max_examples=400, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=5))
def test_random_texts_get_the_python_gates_verdict(texts: list[str]) -> None:
    _same(texts)
    _same(texts, pii=True)


@native
@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=4), st.integers(0, 200))
def test_long_texts_get_the_python_gates_verdict(texts: list[str], pad: int) -> None:
    """Texts longer than a block, the interesting part at any offset."""
    prose = "Paris is the capital of France and has 2.1 million people. " * 3
    _same([prose[:pad] + t + prose for t in texts])


@native
@pytest.mark.parametrize("run", [15, 16, 17, 40])
def test_a_token_run_across_every_block_boundary(run: int) -> None:
    """A run of 16 token characters sends the texts to the Python gate (its rules look at long
    tokens); one of 15 does not. Both gates agree on the verdict either way."""
    prose = "the tower is 330 m tall. " * 12  # ~300 bytes: several 64-byte blocks and a tail
    s = Scrubber()
    assert s._lean is not None
    for start in range(0, 140):
        text = prose[:start] + " " + "k" * run + " " + prose
        _same([text])
        _same([text + "sk-" + "k" * 30])  # a key: both gates say so
        lean = s._lean([text], s._plans, s._keyed, s._key_windows)
        assert (lean == -1) == (run >= 16), (run, start, lean)


@native
def test_literals_keys_and_escapes_at_every_offset() -> None:
    prose = "Height: 330 m; the spire adds 24 m to the roof line. " * 3
    for start in range(0, 130, 3):
        head, tail = prose[:start], prose[start:]
        assert _same([head + "the password is hunter2 " + tail]) == 0
        assert _same([head + "the PASSWORD IS hunter2 " + tail]) == 0
        assert _same([head + "db_pwd: hunter2 " + tail]) == 0
        assert _same([head + '"pin" = "1234" ' + tail]) == 0
        assert _same([head + "PaSsWoRd is fine " + tail]) != 0  # neither trigger: clean
        verdict = _same([head + "a\ttab " + tail])
        assert verdict == 1  # clean, not plain: the tab needs JSON escaping


@native
def test_a_key_split_over_two_texts_or_at_a_texts_start() -> None:
    """Texts are gated as one text joined by newlines: a window reaching back over the join
    matches nothing in either gate."""
    for texts in (
        ["the password", ": hunter2"],
        ["x", "pwd: 12345678"],
        ["pwd", "=1"],
        [":", "="],
        ["", "key: value"],
        ["passw", "ord is hunter2"],
    ):
        _same(texts)


@native
@pytest.mark.parametrize("count", [8, 9, 40])
def test_many_texts_at_once(count: int) -> None:
    """More texts than the C pass keeps on its stack (8): the heap path, same verdicts."""
    prose = [f"passage {i}: the tower is 330 m tall, café “{i}”" for i in range(count)]
    assert _same(prose) == 3
    assert _same([*prose[:-1], "the password is hunter2"]) == 0
    assert _same([*prose[:-1], "a\tb"]) == 1
    assert _same([*prose[:-1], "lone \ud800"]) == 0


@native
def test_many_separators_send_the_text_to_the_python_gate() -> None:
    text = "a: b; " * 70  # more than MAX_KEY_SEPARATORS colons
    assert _same([text]) != 0
    assert scrub_gates.lean_native is not None
    s = Scrubber()
    assert s._lean is not None
    assert s._lean([text], s._plans, s._keyed, s._key_windows) == -1


@native
def test_non_ascii_and_unencodable_texts() -> None:
    assert _same(["café: 3 €, naïve — “quoted”"]) != 0
    assert _same(["Grüße, password is hunter2"]) == 0
    assert _same(["a lone \ud800 surrogate"]) == 0  # not UTF-8: each gate says "not clean"


@native
def test_user_rules_are_gated_alike() -> None:
    order = ScrubRule("order_id", r"ORD-\d{8}", raw_triggers=("ORD-",))
    multi = ScrubRule("two_lines", r"BEGIN\nEND", raw_triggers=("BEGIN\nEND",))
    for text in ("refund ORD-12345678 please", "nothing to see", "ord-1", "BEGIN", "x BEGIN"):
        _same([text], extra_rules=[order, multi])
        _same(["x BEGIN", "END y"], extra_rules=[order, multi])  # across the join: Python sees it


@native
@pytest.mark.parametrize(("kind", "text", "secret"), KINDS, ids=[k[0] for k in KINDS])
def test_no_secret_is_called_clean(kind: str, text: str, secret: str) -> None:
    prose = "The tower is 330 m tall and was finished in 1889. " * 2
    for texts in (
        [text],
        [prose + text],
        [prose, text + " " + prose],
        [prose[:37] + " " + text + " " + prose],
        [prose[:61], "x" + " " * 60 + text],  # the secret across a block boundary
    ):
        assert _same(texts) == 0, (kind, texts)
        assert _same(texts, pii=True) == 0, (kind, texts)


@pytest.fixture(scope="module")
def portable(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The extension built with its portable byte loop (what ARM machines run), beside the SIMD
    build the install made."""
    cc = shutil.which("cc")
    headers = Path(sysconfig.get_paths()["include"])
    if cc is None or not (headers / "Python.h").exists():
        pytest.skip("no C compiler or no Python headers here")
    out = tmp_path_factory.mktemp("portable") / f"_gate{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(
        [
            *(cc, "-O2", "-shared", "-fPIC", "-DNG_NO_SIMD", f"-I{headers}"),
            *(str(REPO / "nexagauge/sdk/_gate.c"), "-o", str(out)),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    spec = importlib.util.spec_from_file_location("_gate", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=5), pad=st.integers(0, 150))
def test_the_portable_loop_gives_the_same_verdicts(
    portable: Any, texts: list[str], pad: int
) -> None:
    prose = "Paris is the capital of France and has 2.1 million people. " * 3
    texts = [prose[:pad] + t for t in texts] + texts
    for kwargs in ({}, {"pii": True}):
        with_c, python = _pair(**kwargs)
        with_c._lean = portable.lean
        assert with_c.gate(list(texts)) == python.gate(list(texts)), texts


_ASAN_DRIVER = r"""
import importlib.util, random, string, sys
spec = importlib.util.spec_from_file_location("_gate", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
from nexagauge.sdk.scrubbing import Scrubber
pieces = [*string.printable, "password", "assword is", "pwd", "://", "sk-", "eyJ", "\u00e9",
          "\u20ac", "\ud800", "a" * 15, "b" * 16, "x" * 70, " = ", ": ", "\x01", "\\"]
rng = random.Random(11)
a, b = Scrubber(pii=True), Scrubber(pii=True)
a._lean, b._lean = mod.lean, None
for _ in range(3000):
    k = rng.choice([0, 1, 3, 9, 20])
    sizes = [0, 1, 3, 16, 63, 64, 65, 200]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.choice(sizes))) for _ in range(k)]
    assert a.gate(list(texts)) == b.gate(list(texts)), texts
for n in range(200):
    for ch in ("a", " ", ":", "\\"):
        assert a.gate([ch * n]) == b.gate([ch * n]), (ch, n)
print("ok")
"""


@pytest.mark.integration
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "portable"])
def test_no_memory_error_under_address_sanitizer(tmp_path: Path, simd: bool) -> None:
    """Both builds under AddressSanitizer and UndefinedBehaviorSanitizer, on random texts of
    every length around the 64-byte blocks and 0-20 texts a call (the heap path): no invalid read,
    no undefined behaviour, the Python gate's verdicts. (An SDK must never crash the app it
    traces.)"""
    cc = shutil.which("cc")
    headers = Path(sysconfig.get_paths()["include"])
    if cc is None or not (headers / "Python.h").exists():
        pytest.skip("no C compiler or no Python headers here")
    probe = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
    libasan = Path(probe.stdout.strip()).resolve()
    if probe.returncode != 0 or not libasan.is_file():
        pytest.skip("the compiler has no AddressSanitizer runtime")
    out = tmp_path / f"_gate{sysconfig.get_config_var('EXT_SUFFIX')}"
    flags = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    subprocess.run(
        [
            *(cc, *flags, "-fno-omit-frame-pointer", "-shared", "-fPIC", f"-I{headers}"),
            *([] if simd else ["-DNG_NO_SIMD"]),
            *(str(REPO / "nexagauge/sdk/_gate.c"), "-o", str(out)),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    env = {**os.environ, "LD_PRELOAD": str(libasan), "ASAN_OPTIONS": "detect_leaks=0"}
    run = subprocess.run(
        [sys.executable, "-c", _ASAN_DRIVER, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-4000:]


@pytest.mark.integration
def test_an_install_without_a_compiler_is_the_python_gate(tmp_path: Path) -> None:
    """``CC=false``: the optional extension fails to build, the wheel builds anyway and the SDK
    in it gates with Python, with the same verdicts. (Built from a copy of the sources: a build
    in the checkout would write into it.)"""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(
        REPO / "nexagauge",
        src / "nexagauge",
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"),
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CFLAGS")}
    out = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"),
            *("--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(src)),
        ],
        env={**env, "CC": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("nexagauge-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "nexagauge/sdk/scrubbing.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c"))], names
    site = tmp_path / "site"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"),
            *("--target", str(site), str(wheel)),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from nexagauge.sdk import scrub_gates\n"
        "from nexagauge.sdk.scrubbing import Scrubber\n"
        "assert scrub_gates.lean_native is None, scrub_gates.__file__\n"
        "s = Scrubber()\n"
        "print(s.gate(['Paris: 2.1 million']), s.gate(['the password is hunter2']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(site)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["3", "0"]
