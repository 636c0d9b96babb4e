"""Tool definitions: names in each source's convention, documentation-style descriptions, JSON
schemas, hidden capabilities, and the synonym maps that build Tool-Broken replacements (§4.4)."""

from __future__ import annotations

import re
from typing import Any

FINISH = "Finish"

# Verb and noun synonyms for replacement names (G7: "a completely different name").
VERB_SYNONYMS: dict[str, tuple[str, ...]] = {
    "fetch": ("retrieve", "obtain"), "get": ("obtain", "acquire"), "search": ("query", "lookup"),
    "extract": ("parse", "pull"), "analyze": ("assess", "evaluate"), "normalize": ("standardize", "harmonize"),
    "score": ("rate", "grade"), "validate": ("verify", "audit"), "compare": ("rank", "contrast"),
    "calculate": ("compute", "evaluate"), "adjust": ("tune", "correct"), "forecast": ("project", "predict"),
    "summarize": ("condense", "digest"), "generate": ("produce", "compose"), "check": ("inspect", "verify"),
    "count": ("tally", "enumerate"), "detect": ("locate", "find"), "describe": ("caption", "explain"),
    "classify": ("categorize", "label"), "choose": ("select", "pick"), "recognize": ("read", "decode"),
    "aggregate": ("combine", "merge"), "round": ("quantize", "approximate"),
}
NOUN_SYNONYMS: dict[str, str] = {
    "image": "picture", "text": "characters", "object": "item", "frames": "stills", "frame": "still",
    "environment": "setting", "character": "figure", "emotional": "affective", "state": "condition",
    "presence": "appearance", "number": "index", "description": "caption", "data": "info",
}
PARAM_SYNONYMS: dict[str, str] = {
    "image": "image_path", "text": "target_text", "object": "object_name", "video": "video_path",
    "timestamp": "time_mark", "frame": "frame_index", "frames": "frame_list", "character": "person",
    "period": "time_range", "source": "input_data", "field": "attribute", "data": "dataset",
    "method": "approach", "items": "entries", "criterion": "rank_by", "value": "amount", "rate": "pct",
    "inputs": "content", "title": "heading", "format": "output_format", "element": "target",
    "key": "keyname", "keys": "combo", "direction": "orientation", "amount": "distance",
    "latitude": "lat", "longitude": "lon", "date": "target_date",
}
AFFIXES = ("_v2", "_new", "_alt", "_1", "new_", "my_")

VAGUE = {"", "tbd", "n/a", "...", "<...>", "xxx", "value", "data", "some", "placeholder"}


_SPLIT = re.compile(r"[\s_\-/&]+")
_NONALNUM = re.compile(r"[^a-z0-9]")


def split_words(words: str) -> list[str]:
    return [w for w in _SPLIT.split(words.lower()) if w]


def style_name(words: str | list[str], style: str, api: str = "") -> str:
    """Compose a tool name in the source's convention: CamelCase, snake_case or `<verb>_<noun>_for_<api>`."""
    ws = split_words(words) if isinstance(words, str) else [w.lower() for w in words]
    ws = [_NONALNUM.sub("", w) for w in ws]
    ws = [w for w in ws if w]
    if style == "camel":
        return "".join(w[:1].upper() + w[1:] for w in ws)
    name = "_".join(ws)
    if style == "api" and api:
        return f"{name}_for_{api}"
    return name


def param_entry(name: str, typ: str, required: bool, desc: str) -> dict[str, Any]:
    return {"name": name, "type": typ, "required": required, "description": desc}


def make_tool(
    name: str,
    purpose: str,
    params: list[dict[str, Any]],
    returns: str,
    *,
    caps: list[str],
    kind: str = "original",
    words: list[str] | None = None,
    notes: str = "Deterministic; safe to call repeatedly.",
    extra_hidden: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A tool record: visible name/description/schema plus hidden capabilities and kind."""
    parts = []
    for p in params:
        req = "required" if p["required"] else "optional"
        parts.append(f"'{p['name']}' ({p['type']}, {req}) - {p['description']}")
    desc = f"{purpose} Parameters: {'; '.join(parts) if parts else 'none'}. Returns {returns} Notes: {notes}"
    jtypes = {"string": "string", "number": "number", "integer": "integer", "array": "array", "object": "object"}
    schema = {
        "type": "object",
        "properties": {p["name"]: {"type": jtypes.get(p["type"], "string"), "description": p["description"]} for p in params},
        "required": [p["name"] for p in params if p["required"]],
    }
    hidden: dict[str, Any] = {"capabilities": list(caps), "kind": kind, "cost": None, "covers": None,
                              "words": list(words or [])}
    if extra_hidden:
        hidden.update(extra_hidden)
    return {"name": name, "description": desc, "parameters": schema, "hidden": hidden}


def finish_tool() -> dict[str, Any]:
    return {
        "name": FINISH,
        "description": "Finish: Call when the task is complete. Parameters: 'mode' (string, required) - "
        "'give_answer' or 'give_up'; 'final_answer' (string, optional)",
        "parameters": {
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["give_answer", "give_up"]},
                           "final_answer": {"type": "string"}},
            "required": ["mode"],
        },
        "hidden": {"capabilities": ["finish"], "kind": "terminal", "cost": 0, "covers": None, "words": ["finish"]},
    }


def has_affix_relation(a: str, b: str) -> bool:
    """True when `a` is `b` plus or minus one of the forbidden affixes (case-insensitive)."""
    a, b = a.lower(), b.lower()
    for x in AFFIXES:
        if a == b + x or b == a + x or a == x + b or b == x + a:
            return True
    return a == b


def _reworded_rest(rest: list[str]) -> list[str]:
    """A name's words after its verb, with the nouns swapped where a synonym is known (else a tail word)."""
    new_rest = [NOUN_SYNONYMS.get(w, w) for w in rest]
    if new_rest == rest:
        new_rest = rest + ["data"] if rest and rest[-1] != "data" else rest + ["info"]
    return new_rest


def _free(name: str, avoid: set[str]) -> bool:
    return name.lower() not in avoid and not any(has_affix_relation(name, a) for a in avoid)


def replacement_name(words: list[str], style: str, api: str, avoid: set[str]) -> str | None:
    """A completely different name for the same function: swap the verb (and nouns when we can)."""
    if not words:
        return None
    verb, rest = words[0], words[1:]
    for syn in VERB_SYNONYMS.get(verb, ()):
        name = style_name([syn, *_reworded_rest(rest)], style, api)
        if _free(name, avoid):
            return name
    return None


# The look-alike layout of Tool-Broken (generator.lookalike_variant): every look-alike of the broken tool,
# the replacement among them, is its description reworded the same way, with the operation said in one
# of these words. The replacement takes a word of its own class (the same job); each other look-alike a
# word of another class. Every word belongs to one class only and is one gerund, so a look-alike differs
# from the broken tool by the same number of words whichever its role. No word shares a stem with how the
# base's tools say its class ("retrieving" for "retrieval" was found by its stem), and a class's words
# share about as many letter pairs with that as other classes' words do (character n-gram rules pick
# the replacement about as often as chance).
LOOKALIKE_OPERATIONS: dict[str, tuple[str, str]] = {
    "calculate": ("deriving", "reckoning"), "compare": ("ranking", "ordering"),
    "round": ("quantizing", "approximating"), "adjust": ("tuning", "correcting"),
    "validate": ("verifying", "auditing"), "forecast": ("projecting", "predicting"),
    "extract": ("parsing", "pulling"), "analyze": ("assessing", "examining"),
    "normalize": ("standardizing", "harmonizing"), "score": ("rating", "grading"),
    "fetch": ("obtaining", "downloading"), "count": ("tallying", "enumerating"),
    "choose": ("picking", "handpicking"), "classify": ("categorizing", "labeling"),
    "detect": ("locating", "finding"), "get": ("translating", "mapping"),
}
# Classes whose words come near each other's meaning: a look-alike never takes a word of a class that
# shares a group with the broken tool's, so no look-alike could be read as doing the same job.
LOOKALIKE_NEAR: tuple[frozenset[str], ...] = (
    frozenset({"fetch", "extract", "get", "detect", "choose"}),
    frozenset({"analyze", "validate", "score", "compare", "classify"}),
    frozenset({"calculate", "adjust", "round", "count"}),
)
# A look-alike's name is the broken tool's object (its name without the verb, nouns swapped for synonyms)
# and one of these: a name says which thing a tool acts on and never which operation, as the
# operation's word in a name and the object's would together tell the replacement (the pair of the
# broken tool's own class and object is the replacement's only).
LOOKALIKE_SUFFIXES = ("service", "engine", "toolkit", "hub", "suite", "module", "utility", "gateway")


def lookalike_name(rest: list[str], suffix: str, style: str, api: str, avoid: set[str]) -> str | None:
    """A look-alike's name: the broken tool's words after its verb (nouns swapped where a synonym is
    known) and `suffix`; None when it is taken."""
    name = style_name([*(NOUN_SYNONYMS.get(w, w) for w in rest), suffix], style, api)
    return name if _free(name, avoid) else None


def schema_type_ok(value: Any, typ: str) -> bool:
    if typ == "string":
        return isinstance(value, str)
    if typ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if typ == "array":
        return isinstance(value, list)
    return True


def validate_call(tool: dict[str, Any], args: dict[str, Any]) -> bool:
    """JSON-schema check of a concrete call (required keys present, known keys typed right)."""
    schema = tool["parameters"]
    props = schema.get("properties", {})
    if any(r not in args for r in schema.get("required", [])):
        return False
    for k, v in args.items():
        if k not in props:
            return False
        enum = props[k].get("enum")
        if enum is not None and v not in enum:
            return False
        if not schema_type_ok(v, props[k].get("type", "string")):
            return False
    return True


def render_tool_line(tool: dict[str, Any], with_cost: bool = False) -> str:
    """`- {name}: {description}\\n  Parameters: {json}` (§5), with `  cost={c}` in the efficiency setting."""
    import json

    line = f"- {tool['name']}: {tool['description']}\n  Parameters: {json.dumps(tool['parameters'], ensure_ascii=False)}"
    if with_cost and tool["hidden"].get("cost") is not None:
        line += f"\n  cost={tool['hidden']['cost']}"
    return line
