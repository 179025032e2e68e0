"""What the benchmark judge answers: schema-valid JSON filled from the benchmark cases.

Part of ``bench/llm_server.py``. :class:`Answerer` finds which benchmark case a request is about
(the answer or question text it quotes), then fills the JSON schema the client asked for: claims
and statements from that case's sentences, one verdict per statement the prompt lists, reasons of
realistic length. Verdicts are a deterministic function of the statement (80% positive), so every
tool under test gets the same verdict for the same sentence.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

REASON = (
    "The statement {v} because it {rel} the details given in the provided text about this topic."
)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def _h(*parts: str) -> int:
    return int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:8], 16)


@dataclass
class Case:
    case_id: str
    question: str
    output: str
    contexts: list[str]
    out_sents: list[str] = field(default_factory=list)
    ctx_sents: list[str] = field(default_factory=list)


class Answerer:
    """Schema-filling answers from the benchmark cases (thread-safe)."""

    def __init__(self, cases: list[Case]) -> None:
        self.cases = cases
        self.lock = threading.Lock()
        #: runners evaluate cases one after another, so a request that quotes no case text (a
        #: "summarize the verdicts" call) belongs to the case of the latest attributed request
        self.last_case: Case | None = None

    # -- which case ----------------------------------------------------------------------
    def find_case(self, text: str) -> Case | None:
        found = self._find_case(text)
        with self.lock:
            if found is not None:
                self.last_case = found
            return found or self.last_case

    def _find_case(self, text: str) -> Case | None:
        best: tuple[int, Case] | None = None
        for c in self.cases:
            score = 0
            if c.output[:60] in text:
                score += 2
            if c.question[:50] in text:
                score += 1
            if score and (best is None or score > best[0]):
                best = (score, c)
            if not score:
                hits = sum(1 for s in c.out_sents if s[:40] in text)
                if hits and (best is None or hits > best[0] - 1):
                    best = (hits, c)
        return best[1] if best else None

    # -- schema filling ------------------------------------------------------------------
    def fill(self, schema: dict[str, Any], text: str, case: Case | None) -> Any:
        defs = schema.get("$defs") or schema.get("definitions") or {}
        return self._fill(schema, "", text, case, defs, 0)

    def _resolve(self, s: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in s:
            s = defs.get(s["$ref"].split("/")[-1], {})
        if "allOf" in s and len(s["allOf"]) == 1:
            return self._resolve(s["allOf"][0], defs)
        if "anyOf" in s:
            non_null = [x for x in s["anyOf"] if x.get("type") != "null"]
            return self._resolve(non_null[0], defs) if non_null else {"type": "null"}
        return s

    def _known_items(self, text: str, case: Case | None, name: str) -> list[str]:
        """Statements of this case that the prompt lists (for one-verdict-per-item answers)."""
        if case is None:
            return []
        pool = case.ctx_sents if "truth" in name else case.out_sents + case.ctx_sents
        return [s for s in pool if s[:40] in text]

    def _count_items(self, text: str, case: Case | None) -> int:
        tags = re.findall(r"<x[0-9a-f]{8} i=(\d+)>", text)
        if tags:
            return len(tags)
        known = self._known_items(text, case, "")
        if known:
            return len(known)
        numbered = re.findall(r"^\s*\d+[.)] ", text, re.M)
        return max(1, len(numbered))

    def _verdict(self, item: str, enum: list[Any] | None, typ: str | None) -> Any:
        yes = _h(item) % 5 != 0  # 80% positive, deterministic per statement
        if enum:
            lowered = [str(e).lower() for e in enum]
            for want in ("yes", "supported", "1", "true") if yes else ("no", "0", "false"):
                if want in lowered:
                    return enum[lowered.index(want)]
            ints = [e for e in enum if isinstance(e, int) and not isinstance(e, bool)]
            if ints:
                return max(ints) if yes else min(ints)
            return enum[0]
        if typ == "boolean":
            return yes
        if typ == "integer":
            return 1 if yes else 0
        return "yes" if yes else "no"

    def _fill(
        self,
        s: dict[str, Any],
        name: str,
        text: str,
        case: Case | None,
        defs: dict[str, Any],
        i: int,
    ) -> Any:
        s = self._resolve(s, defs)
        typ = s.get("type")
        if isinstance(typ, list):
            typ = next((t for t in typ if t != "null"), "string")
        lname = name.lower()
        if "enum" in s or "const" in s:
            enum = s.get("enum") or [s.get("const")]
            if "verdict" in lname or "label" in lname:
                src = self._item_text(lname, text, case, i)
                return self._verdict(src, enum, typ)
            return enum[0]
        if typ == "object" or "properties" in s:
            props = s.get("properties", {})
            return {k: self._fill(v, k, text, case, defs, i) for k, v in props.items()}
        if typ == "array":
            item_s = self._resolve(s.get("items", {}), defs)
            inner = (
                "claims"
                if lname in ("chunks", "claims") and item_s.get("type") == "array"
                else lname
            )
            n = self._array_len(inner if inner != lname else lname, item_s, text, case)
            # a strict schema's bounds are part of the contract (one list per chunk, N verdicts)
            n = max(int(s.get("minItems", 0)), min(n, int(s.get("maxItems", n))))
            return [self._fill(item_s, inner, text, case, defs, j) for j in range(n)]
        if typ == "boolean":
            return self._verdict(self._item_text(lname, text, case, i), None, "boolean")
        if typ in ("integer", "number"):
            if "noncommittal" in lname:
                return 0
            if "confidence" in lname or ("score" in lname and typ == "number"):
                return 0.9
            if "verdict" in lname:
                return self._verdict(self._item_text(lname, text, case, i), None, "integer")
            if "index" in lname or "chunk" in lname:
                return 0
            return 1
        # strings
        if any(k in lname for k in ("reason", "explanation", "rationale")):
            v = "is supported" if _h(lname, str(i), text[:80]) % 5 else "is not supported"
            rel = "matches" if "is supported" in v else "goes beyond"
            return REASON.format(v=v, rel=rel)
        if "question" in lname:
            q = case.question if case else "What is this about?"
            return f"Could you tell me {q[0].lower()}{q[1:]}" if q else q
        if "verdict" in lname:
            return self._verdict(self._item_text(lname, text, case, i), None, "string")
        return self._item_text(lname, text, case, i)

    def _array_len(self, lname: str, item_s: dict[str, Any], text: str, case: Case | None) -> int:
        props = set(item_s.get("properties", {}))
        if "verdict" in lname or "verdict" in props or "verdicts" in lname:
            return self._count_items(text, case)
        if case is None:
            return 2
        if "truth" in lname:
            return len(case.ctx_sents)
        if any(k in lname for k in ("statement", "claim", "sentence")) or "text" in props:
            return len(case.out_sents)
        if "question" in lname:
            return 1
        return 2

    def _item_text(self, lname: str, text: str, case: Case | None, i: int) -> str:
        if case is None:
            return "A short statement."
        if "truth" in lname:
            pool = case.ctx_sents
        else:
            listed = self._known_items(text, case, lname)
            pool = listed if "verdict" in lname and listed else case.out_sents
        return pool[i % len(pool)] if pool else case.output

    def forget_case(self) -> None:
        """Forget the latest attributed case (between tools of one benchmark run)."""
        with self.lock:
            self.last_case = None


def load_cases(path: str) -> list[Case]:
    cases = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            ctx = r["context"] if isinstance(r["context"], list) else [r["context"]]
            c = Case(r["case_id"], r["input"], r["output"], ctx)
            c.out_sents = sentences(c.output)
            c.ctx_sents = [s for t in ctx for s in sentences(t)]
            cases.append(c)
    return cases
