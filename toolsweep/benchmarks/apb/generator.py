"""Seeded, LLM-free generator of APB cases (§3–§4).

Every case comes from its own RNG stream `sha256(f"{gen_seed}|{stream}|{index}")`, so a case does
not depend on generation order or worker count. Base cases (the 1,109 holistic pool) follow the
domain × source allocation of §2.5, the step-count quotas of Tab. 10 and the modality quotas of
§2.4; the variants (step-wise cuts, distractors, broken tools, unsolvable edits, efficiency tool
banks, refinement subsets) are drawn from them with stratified, seeded subsets.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from toolsweep.benchmarks.apb import plans
from toolsweep.benchmarks.apb.domains import (
    DOMAIN_BY_NAME,
    NEUTRAL_TOOLS,
    PERCEPTION_SENTENCE,
    PRIVATE_INFO_CAPS,
    SOURCE_MODALITY,
    SOURCE_STEPS,
    SOURCE_STYLE,
    SOURCES,
    SYSTEM_PROMPTS,
    Domain,
    allocation,
)
from toolsweep.benchmarks.apb.tools import (
    FINISH,
    LOOKALIKE_NEAR,
    LOOKALIKE_OPERATIONS,
    LOOKALIKE_SUFFIXES,
    PARAM_SYNONYMS,
    finish_tool,
    lookalike_name,
    make_tool,
    param_entry,
    replacement_name,
    split_words,
    style_name,
    validate_call,
)
from toolsweep.evaluator.types import canonical_json

GENERATOR_VERSION = "apb-gen-8"
LOOKALIKES = 3  # look-alikes of the broken tool beside its replacement (`lookalike_variant`)

BIN_RANGES = ((3, 10), (11, 20), (21, 30))
DISTRACTOR_FIT_ROUNDS = 4  # balanced_pool's rounds: the extraneous probe is at chance from the fourth
RATES = (0.05, 0.07, 0.08, 0.1, 0.12, 0.15)  # the rate a query states (the info-missing slot of §4.5)
RATE_TEXTS = tuple(f"{round(r * 100)}%" for r in RATES)
CHAIN_VERBS = ("fetch", "extract", "analyze", "normalize", "score")
CHAIN_FIELDS = ("records", "figure", "assessment", "normalized", "score")
CHAIN_OPTIONS = {
    "extract": ("field", ("revenue", "volume", "total", "average")),
    "analyze": ("method", ("trend", "variance", "growth")),
    "normalize": ("scale", ("z-score", "min-max", "percent")),
    "score": ("weighting", ("equal", "recency", "volume")),
}
TAIL_VERBS = (
    ("adjust", "factor", (1.1, 1.25, 0.9), "adjust the {m} by a factor of {v}"),
    ("forecast", "horizon", ("6 months", "12 months", "24 months"), "forecast the {m} over a {v} horizon"),
    ("validate", "threshold", (50, 75, 90), "validate the {m} against a threshold of {v}"),
    ("round", "digits", (1, 2, 3), "round the {m} to {v} decimal places"),
)
GUI_LABELS = ("File menu", "Save button", "Search box", "Settings tab", "OK button", "Address bar",
              "Filter dropdown", "Export option", "Refresh icon", "Sidebar", "New tab button", "Submit button")
FORMATS = ("pdf", "docx", "html", "markdown")
BRANDS = ("MAGNA", "NOVA", "ALTO", "KESTREL", "ORBIT", "VANTA", "LUMEN", "CEDAR")
PERIODS = ("2021", "2022", "2023", "2024")
EMOTIONS = ("anxious", "joyful", "melancholic", "determined", "surprised", "calm")
ENVIRONMENTS = ("indoor kitchen", "rainy street", "forest trail", "office corridor", "beach at dusk")



def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def case_rng(gen_seed: int, stream: str, index: Any) -> random.Random:
    """One independent stream per concern (§3.2)."""
    digest = hashlib.sha256(f"{gen_seed}|{stream}|{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def case_hash(case: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(case).encode()).hexdigest()


def step_bin(length: int) -> int:
    return 0 if length <= 10 else (1 if length <= 20 else 2)


# ----------------------------------------------------------------------------- quotas (§2.5)

def source_lengths(gen_seed: int, source: str) -> list[int]:
    """Step counts hitting Tab. 10's bins exactly and its mean to the rounded total."""
    n, mean, bins = SOURCE_STEPS[source]
    rng = case_rng(gen_seed, "lengths", source)
    labels = [b for b, count in enumerate(bins) for _ in range(count)]
    rng.shuffle(labels)
    lengths = []
    for b in labels:
        lo, hi = BIN_RANGES[b]
        mode = lo + (hi - lo) / 3
        lengths.append(min(hi, max(lo, int(rng.triangular(lo, hi + 1, mode)))))
    target = round(mean * n)
    order = list(range(n))
    rng.shuffle(order)
    diff = target - sum(lengths)
    guard = 0
    while diff != 0:
        moved = False
        for i in order:
            if diff == 0:
                break
            lo, hi = BIN_RANGES[labels[i]]
            if diff > 0 and lengths[i] < hi:
                lengths[i] += 1
                diff -= 1
                moved = True
            elif diff < 0 and lengths[i] > lo:
                lengths[i] -= 1
                diff += 1
                moved = True
        guard += 1
        if not moved or guard > 100:
            raise RuntimeError(f"cannot reach the step-count mean for {source}")
    return lengths


@dataclass(frozen=True)
class Slot:
    index: int
    domain: str
    source: str
    length: int
    modality: str


def slots(gen_seed: int) -> list[Slot]:
    """The 1,109 base slots: (domain, source) from §2.5, length and modality from the source quotas."""
    alloc = allocation()
    by_source: dict[str, list[int]] = {s: [] for s in SOURCES}
    for i, (_, s) in enumerate(alloc):
        by_source[s].append(i)
    length: dict[int, int] = {}
    modality: dict[int, str] = {}
    for s in SOURCES:
        idxs = list(by_source[s])
        rng = case_rng(gen_seed, "assign", s)
        rng.shuffle(idxs)
        t, im, v = SOURCE_MODALITY[s]
        mods = ["text"] * t + ["image"] * im + ["video"] * v
        rng.shuffle(mods)
        for i, L, m in zip(idxs, source_lengths(gen_seed, s), mods):
            length[i] = L
            modality[i] = m
    return [Slot(i, d, s, length[i], modality[i]) for i, (d, s) in enumerate(alloc)]


# ----------------------------------------------------------------------------- base case synthesis

class _Builder:
    """Composes one base case: perception block, entity fan-out chains, join, compute tail, goal."""

    def __init__(self, slot: Slot, rng: random.Random, gen_seed: int) -> None:
        self.slot = slot
        self.rng = rng
        self.gen_seed = gen_seed
        self.domain: Domain = DOMAIN_BY_NAME[slot.domain]
        self.style = SOURCE_STYLE[slot.source]
        self.api = self.domain.api
        self.nodes: list[dict[str, Any]] = []
        self.tools: dict[str, dict[str, Any]] = {}
        self.files: list[dict[str, Any]] = []
        self.consumed: set[str] = set()
        self.extra: dict[str, Any] = {}
        # file numbers from their own stream ("image_4821.png"), so the base's other draws stay as they were
        self.file_rng = case_rng(gen_seed, "file_names", slot.index)
        # the base's vocabulary, from its own stream too: which of the domain's nouns its chains act on
        # (in which order), which metric it computes and which deliverable it produces
        vocab = case_rng(gen_seed, "vocabulary", slot.index)
        self.nouns = tuple(vocab.sample(self.domain.nouns, len(self.domain.nouns)))
        self.metric = vocab.choice(self.domain.metrics)
        self.deliverable = vocab.choice(self.domain.deliverables)

    # -- helpers
    def file_name(self, kind: str, ext: str) -> str:
        """A file's name, numbered like a camera or a screen recorder would: a case that names one file
        while another is attached (an Unsolvable visual case) shows two different names."""
        taken = {f["name"] for f in self.files}
        while True:
            name = f"{kind}_{self.file_rng.randrange(1000, 10000)}.{ext}"
            if name not in taken:
                return name

    def name(self, words: str) -> str:
        return style_name(words, self.style, self.api)

    def add_tool(self, words: str, purpose: str, params: list[dict[str, Any]], returns: str, caps: list[str],
                 *, fixed_name: str | None = None) -> str:
        name = fixed_name or self.name(words)
        if name not in self.tools:
            self.tools[name] = make_tool(name, purpose, params, returns, caps=caps, words=split_words(words))
        return name

    def add_node(self, tool: str, args: dict[str, Any], output: dict[str, Any], nl: str, cap: str,
                 *, deps: list[str] | None = None, alt: list[str] | None = None, goal: bool = False) -> str:
        nid = f"n{len(self.nodes) + 1}"
        srcs = [s for spec in args.values() for s in plans.spec_sources(spec)]
        all_deps = sorted(set(srcs) | set(deps or []), key=lambda x: int(x[1:]))
        self.consumed.update(all_deps)
        self.nodes.append({"id": nid, "tool": tool, "args": args, "deps": all_deps, "required": True,
                           "alt_tools": list(alt or []), "output": output, "goal": goal, "nl": nl, "cap": cap,
                           "secret_fields": list(output)})
        return nid

    def num(self, lo: float, hi: float) -> float:
        return round(self.rng.uniform(lo, hi), 2)

    # -- perception blocks
    def image_block(self, p: int) -> str | None:
        rng = self.rng
        obj = rng.choice(self.domain.objects)
        kinds = rng.sample(["describe", "ocr", "count", "detect"], p)
        order = {"describe": 0, "ocr": 1, "count": 2, "detect": 3}
        kinds.sort(key=order.get)
        n_files = 2 if p >= 3 else 1
        brand = rng.choice(BRANDS)
        ocr_text = f"{brand} {rng.randint(100, 999)}-{rng.choice('ABCDEFGH')}"
        count = rng.randint(2, 9)
        objects = [{"class": obj, "attributes": [rng.choice(["red", "blue", "green", "white", "black"])],
                    "bbox": [rng.randint(0, 400), rng.randint(0, 300), rng.randint(20, 80), rng.randint(20, 80)]}
                   for _ in range(count)]
        objects.append({"class": rng.choice([o for o in self.domain.objects if o != obj] or [obj]),
                        "attributes": ["background"], "bbox": [10, 10, 60, 40]})
        for f in range(n_files):
            fname = self.file_name("image", "png")
            scene = {"objects": objects if f == 0 else objects[-1:],
                     "text_regions": [{"text": ocr_text, "bbox": [120, 40, 200, 30]}] if f == n_files - 1 else []}
            cls = sorted({o["class"] for o in scene["objects"]})
            self.files.append({"name": fname, "type": "image", "scene": scene,
                               "caption": f"Photo for {_a(self.domain.name.lower())} task showing {', '.join(cls)}."})
        camel = self.style == "camel"
        last = None
        self.extra["count_node"] = None
        for k in kinds:
            if k == "describe":
                f = self.files[0]["name"]
                t = self.add_tool("image description", "Does a general description of an image's content.",
                                  [param_entry("image", "string", True, "file name of the image")],
                                  "a JSON object with 'description' (string).", ["describe"],
                                  fixed_name="ImageDescription" if camel else "image_description")
                last = self.add_node(t, {"image": plans.const(f, goal_slot=True)},
                                     {"description": f"a scene with {obj}s and a {self.domain.objects[-1]}"},
                                     f"describe {f}", "describe")
            elif k == "ocr":
                f = self.files[-1]["name"]
                t = self.add_tool("ocr", "Does optical character recognition on an image.",
                                  [param_entry("image", "string", True, "file name of the image")],
                                  "a JSON object with 'text' (string).", ["ocr"], fixed_name="OCR" if camel else "ocr")
                alt = []
                if rng.random() < 0.5:
                    alt = [self.add_tool("image text extractor", "Does text extraction from an image (an OCR backup service).",
                                         [param_entry("image", "string", True, "file name of the image")],
                                         "a JSON object with 'text' (string).", ["ocr"])]
                last = self.add_node(t, {"image": plans.const(f, goal_slot=True)}, {"text": ocr_text},
                                     f"read the text printed in {f}", "ocr", alt=alt)
            elif k == "count":
                f = self.files[0]["name"]
                t = self.add_tool("count given object", "Does counting of a given object class in an image.",
                                  [param_entry("image", "string", True, "file name of the image"),
                                   param_entry("text", "string", True, "the object class to count")],
                                  "a JSON object with 'count' (integer).", ["count"],
                                  fixed_name="CountGivenObject" if camel else "count_given_object")
                alt = []
                if rng.random() < 0.5:
                    alt = [self.add_tool("object counter", "Does object counting in an image (backup counter).",
                                         [param_entry("image", "string", True, "file name of the image"),
                                          param_entry("text", "string", True, "the object class to count")],
                                         "a JSON object with 'count' (integer).", ["count"])]
                last = self.add_node(t, {"image": plans.const(f, goal_slot=True), "text": plans.keywords([obj], obj)},
                                     {"count": count}, f"count the {obj}s in {f}", "count", alt=alt)
                self.extra["count_node"] = last
            else:
                f = self.files[0]["name"]
                t = self.add_tool("object detector", "Does detection of objects of a class in an image.",
                                  [param_entry("image", "string", True, "file name of the image"),
                                   param_entry("object", "string", True, "the object class to detect")],
                                  "a JSON object with 'regions' (array of region ids).", ["detect"],
                                  fixed_name="ObjectDetector" if camel else "object_detector")
                regions = [f"R{rng.randint(10, 99)}" for _ in range(3)]
                last = self.add_node(t, {"image": plans.const(f, goal_slot=True), "object": plans.keywords([obj], obj)},
                                     {"regions": regions}, f"detect every {obj} in {f}", "detect")
        self.extra["obj"] = obj
        return last

    def video_block(self, p: int) -> str | None:
        rng = self.rng
        minutes, seconds = rng.randint(0, 4), rng.randint(0, 59)
        ts = f"{minutes}:{seconds:02d}"
        frame = (minutes * 60 + seconds) * 24
        total = frame + rng.randint(500, 3000)
        fname = self.file_name("video", "mp4")
        character = rng.choice(self.domain.entities) if self.domain.name == "Narrative & Emotional Analysis" \
            else f"the person with the {rng.choice(self.domain.objects)}"
        self.extra["character"] = character
        self.files.append({"name": fname, "type": "video",
                           "scene": {"fps": 24, "frame_count": total,
                                     "sampled_frames": [{"frame": i * total // 8, "objects": [rng.choice(self.domain.objects)]}
                                                        for i in range(8)]},
                           "caption": f"Video clip for {_a(self.domain.name.lower())} task."})
        t = self.add_tool("get frame number", "Does conversion of a timestamp to a frame number.",
                          [param_entry("video", "string", True, "the video file"),
                           param_entry("timestamp", "string", True, "mm:ss timestamp")],
                          "a JSON object with 'frame' (integer).", ["frame_index"])
        last = self.add_node(t, {"video": plans.const(fname, goal_slot=True), "timestamp": plans.const(ts, match="exact")},
                             {"frame": frame}, f"find the frame number at {ts} in {fname}", "frame_index")
        if p < 2:
            return last
        frames = [frame - 24, frame, frame + 24]
        t = self.add_tool("choose frames", "Does selection of frames around a given frame.",
                          [param_entry("video", "string", True, "the video file"),
                           param_entry("frame", "integer", True, "the center frame")],
                          "a JSON object with 'frames' (array of integers).", ["choose_frames"])
        first = last
        last = self.add_node(t, {"video": plans.const(fname, goal_slot=True), "frame": plans.ref(first, "frame")},
                             {"frames": frames}, "choose the frames around that frame", "choose_frames")
        chooser = last
        extra = [
            ("classify environment", "Does classification of the environment shown in frames.", "environment",
             rng.choice(ENVIRONMENTS), "classify the environment shown in those frames", "classify", None),
            ("detect character presence", "Does detection of whether a character appears in frames.", "present_frames",
             frames[1:], f"detect whether {character} appears in those frames", "detect", "character"),
            ("analyze emotional state", "Does analysis of a character's emotional state in frames.", "emotion",
             rng.choice(EMOTIONS), f"analyze the emotional state of {character}", "emotion", "character"),
        ]
        for words, purpose, out, val, nl, cap, extra_param in extra[: max(0, p - 2)]:
            params = [param_entry("frames", "array", True, "frame numbers to inspect")]
            args: dict[str, Any] = {"frames": plans.ref(chooser, "frames")}
            if extra_param:
                params.append(param_entry("character", "string", True, "who to look for"))
                args["character"] = plans.const(character, goal_slot=True)
            t = self.add_tool(words, purpose, params, f"a JSON object with '{out}'.", [cap])
            last = self.add_node(t, args, {out: val}, nl, cap)
        return last

    def gui_block(self, p: int) -> str | None:
        rng = self.rng
        labels = list(GUI_LABELS)
        rng.shuffle(labels)
        widgets = [{"label": lab, "role": "button" if "button" in lab.lower() else "widget",
                    "bbox": [rng.randint(0, 1200), rng.randint(0, 700), 90, 28]} for lab in labels[:8]]
        self.files.append({"name": self.file_name("screenshot", "png"), "type": "image", "scene": {"widgets": widgets},
                           "caption": "Screenshot of a desktop application window."})
        gui = {
            "click": ("Does a single left click on a UI element.", "element", "click"),
            "doubleclick": ("Does a double click on a UI element.", "element", "click"),
            "write": ("Does typing of text into the focused field.", "text", "type"),
            "press": ("Does a key press.", "key", "press"),
            "hotkey": ("Does a keyboard shortcut.", "keys", "hotkey"),
            "scroll": ("Does scrolling of the active view.", "direction", "scroll"),
            "moveto": ("Does moving the mouse pointer onto a UI element.", "element", "move"),
            "dragto": ("Does dragging the current selection onto a UI element.", "element", "drag"),
        }
        used: dict[str, int] = {}
        limit = (self.slot.length - 1) // 2  # no tool may cover >= 50% of the nodes
        entity = rng.choice(self.domain.entities)
        self.extra["gui_entity"] = entity
        last = None
        for i in range(p):
            choices = [g for g in gui if used.get(g, 0) < limit]
            weights = [4 if g in ("click", "write") else 1 for g in choices]
            g = rng.choices(choices, weights)[0]
            used[g] = used.get(g, 0) + 1
            purpose, param, cap = gui[g]
            t = self.add_tool(g, purpose, [param_entry(param, "string", True, f"the {param}")],
                              "a JSON object with 'screen' (the new screen state id).", [cap], fixed_name=g)
            if param == "element":
                lab = widgets[i % len(widgets)]["label"]
                val, nl = plans.const(lab, match="contains"), f"{g} the {lab}"
            elif param == "text":
                val, nl = plans.const(entity, goal_slot=True), f"type '{entity}'"
            elif param == "key":
                key = rng.choice(["enter", "tab", "escape"])
                val, nl = plans.const(key), f"press {key}"
            elif param == "keys":
                keys = rng.choice(["ctrl+s", "ctrl+f", "ctrl+c"])
                val, nl = plans.const(keys), f"press the {keys} shortcut"
            else:
                d = rng.choice(["down", "up"])
                val, nl = plans.const(d), f"scroll {d}"
            last = self.add_node(t, {param: val}, {"screen": f"screen_{i + 2}"}, nl, cap,
                                 deps=[last] if last else None)
        return last

    # -- the whole DAG
    def build(self) -> dict[str, Any]:
        rng, L, d = self.rng, self.slot.length, self.domain
        mod = self.slot.modality
        if self.slot.source == "OpenCUA":
            p = max(1, min(L - 2, round(L * rng.uniform(0.3, 0.5))))
        elif mod == "image":
            p = rng.randint(1, min(3, L - 2))
        elif mod == "video":
            lo = min(2, L - 2)
            p = rng.randint(lo, max(lo, min(5, L - 2)))
        else:
            p = 0
        if self.slot.source == "OpenCUA":
            perception_last = self.gui_block(p)
        elif mod == "image":
            perception_last = self.image_block(p)
        elif mod == "video":
            perception_last = self.video_block(p)
        else:
            perception_last = None
        rest = L - p - 2  # minus compute and goal
        combos = []
        for m in range(0, 7):
            for c in range(1, 6) if m else [0]:
                for r in range(0, 5):
                    if m * c + (1 if m >= 2 else 0) + r != rest:
                        continue
                    if m >= 2 and 2 * m >= L:
                        continue
                    if m == 0 and perception_last is None:
                        continue
                    if m == 1 and c == 0:
                        continue
                    combos.append((m, c, r))
        if not combos:
            raise ValueError(f"no DAG shape for L={L}, p={p}")
        weights = [1 + (2 if m >= 2 else 0) + (1 if c >= 2 else 0) + (2 if r <= 2 else 0) for m, c, r in combos]
        m, c, r = rng.choices(combos, weights)[0]
        entities = rng.sample(list(d.entities), max(1, m))
        self.extra["entities"] = entities
        period = rng.choice(PERIODS)
        # fan-out chains
        chain_ends: list[str] = []
        for e in entities[:m]:
            prev = None
            for pos in range(c):
                verb, noun, fld = CHAIN_VERBS[pos], self.nouns[pos], CHAIN_FIELDS[pos]
                words = f"{verb} {noun}" + (" fields" if verb == "extract" else "")
                if pos == 0:
                    t = self.add_tool(words, f"Does retrieval of the {noun} for {_a(d.entity_param)}.",
                                      [param_entry(d.entity_param, "string", True, f"the {d.entity_param}"),
                                       param_entry("period", "string", True, "the reporting year")],
                                      f"a JSON object with '{fld}' (number).", [f"acquire:{noun}"])
                    prev = self.add_node(t, {d.entity_param: plans.const(e, goal_slot=True),
                                             "period": plans.const(period, match="exact")},
                                         {fld: self.num(100, 999)}, f"fetch the {noun} of {e} for {period}",
                                         f"acquire:{noun}")
                else:
                    opt_name, opts = CHAIN_OPTIONS[verb]
                    opt = opts[(pos + len(e)) % len(opts)]
                    t = self.add_tool(words, f"Does {verb} processing of {CHAIN_FIELDS[pos - 1]} data from the {noun}.",
                                      [param_entry("source", "number", True, "the data to process"),
                                       param_entry(opt_name, "string", True, f"one of {', '.join(opts)}")],
                                      f"a JSON object with '{fld}' (number).", [f"{verb}:{noun}"])
                    prev = self.add_node(t, {"source": plans.ref(prev, CHAIN_FIELDS[pos - 1]), opt_name: plans.const(opt)},
                                         {fld: self.num(1, 99)}, f"{verb} the {noun} of {e} ({opt_name}: {opt})",
                                         f"{verb}:{noun}")
            chain_ends.append(prev)
        nmap = {n["id"]: n for n in self.nodes}
        metric = self.metric
        if m >= 2:
            flds = [next(iter(nmap[x]["output"])) for x in chain_ends]
            vals = [nmap[x]["output"][f] for x, f in zip(chain_ends, flds)]
            crit = rng.choice(["highest", "lowest"])
            t = self.add_tool(f"compare {self.nouns[c - 1]} results", "Does comparison of values across entities.",
                              [param_entry("items", "array", True, "the values to compare"),
                               param_entry("criterion", "string", True, "highest or lowest")],
                              "a JSON object with 'top_value' (number).", ["compare"])
            top = max(vals) if crit == "highest" else min(vals)
            feed = self.add_node(t, {"items": plans.expr(chain_ends, flds, vals), "criterion": plans.const(crit)},
                                 {"top_value": top}, f"compare the results across {', '.join(entities[:m])} by {crit} value",
                                 "compare")
            feed_field = "top_value"
        elif m == 1:
            feed, feed_field = chain_ends[0], next(iter(self.nodes[-1]["output"]))
            feed = chain_ends[0]
            feed_field = next(iter(nmap[feed]["output"]))
        else:
            feed, feed_field = perception_last, next(iter(self.nodes[-1]["output"]))
            nmap = {n["id"]: n for n in self.nodes}
            feed_field = next(iter(nmap[feed]["output"]))
        # compute with a rate stated in Q (the info-missing slot of §4.5)
        rate = rng.choice(RATES)
        rate_text = RATE_TEXTS[RATES.index(rate)]
        params = [param_entry("value", "number", True, "the base value"),
                  param_entry("rate", "number", True, "the rate as a fraction")]
        args: dict[str, Any] = {"value": plans.ref(feed, feed_field), "rate": plans.const(rate, match="num")}
        cnode = self.extra.get("count_node")
        nl = f"calculate the {metric} applying a {rate_text} rate"
        if cnode and cnode not in self.consumed:
            params.append(param_entry("quantity", "integer", True, "how many units"))
            args["quantity"] = plans.ref(cnode, "count")
            nl += " and the counted quantity"
        t = self.add_tool(f"calculate {metric}", f"Does calculation of the {metric} from a value and a rate.",
                          params, "a JSON object with 'result' (number).", [f"calculate:{metric}"])
        prev = self.add_node(t, args, {"result": self.num(10, 5000)}, nl, "calculate")
        self.extra.update(rate=rate, rate_text=rate_text, compute_node=prev)
        for verb, pname, opts, tmpl in rng.sample(TAIL_VERBS, r):
            v = rng.choice(opts)
            t = self.add_tool(f"{verb} {metric}", f"Does {verb} of {_a(metric)} value.",
                              [param_entry("value", "number", True, "the value"),
                               param_entry(pname, "number" if not isinstance(v, str) else "string", True, f"the {pname}")],
                              "a JSON object with 'result' (number).", [f"{verb}_metric:{metric}"])
            spec = plans.const(v, match="num" if not isinstance(v, str) else "ci")
            text = tmpl.format(m=metric, v=v)
            if verb == "validate":  # a range, not a value: any threshold inside it is right (§3.4 param_range)
                lo, hi = v - 10, v + 10
                spec = plans.value_range(v, lo, hi)
                text = tmpl.format(m=metric, v=f"between {lo} and {hi}").replace("of between", "between")
            prev = self.add_node(t, {"value": plans.ref(prev, "result"), pname: spec},
                                 {"result": self.num(10, 5000)}, text, f"{verb}_metric")
            if verb == "validate":
                self.extra["range_node"] = (prev, pname, lo, hi)
        # goal: the deliverable consumes every loose end
        nmap = {n["id"]: n for n in self.nodes}
        loose = [n["id"] for n in self.nodes if n["id"] not in self.consumed]
        flds = [next(iter(nmap[x]["output"])) for x in loose]
        vals = [nmap[x]["output"][f] for x, f in zip(loose, flds)]
        fmt = rng.choice(FORMATS)
        title = f"{entities[0] if m else self.extra.get('gui_entity', d.name)} {self.deliverable}"
        t = self.add_tool(f"generate {self.deliverable}", f"Does generation of {_a(self.deliverable)} document.",
                          [param_entry("inputs", "array", True, "the findings to include"),
                           param_entry("title", "string", True, "document title"),
                           param_entry("format", "string", True, "one of pdf, docx, html, markdown")],
                          "a JSON object with 'document_id' (string).", [f"deliver:{self.deliverable}"])
        goal = self.add_node(t, {"inputs": plans.expr(loose, flds, vals), "title": plans.const(title, goal_slot=True, match="contains"),
                                 "format": plans.const(fmt)},
                             {"document_id": f"DOC-{rng.randint(1000, 9999)}"},
                             f"produce {_a(fmt.upper() if fmt != 'markdown' else 'Markdown')} {self.deliverable} titled '{title}'",
                             "deliver", goal=True)
        self.extra.update(goal=goal, fmt=fmt)
        return self.finish(goal)

    def reconcile_types(self) -> None:
        """Schema types follow the values the calls really pass (refs inherit their source's type)."""
        nmap = plans.node_map(self.nodes)
        seen: dict[tuple[str, str], str] = {}
        for n in self.nodes:
            for p, v in plans.resolve_args(n, nmap).items():
                if isinstance(v, bool) or isinstance(v, str):
                    typ = "string"
                elif isinstance(v, int):
                    typ = "integer"
                elif isinstance(v, float):
                    typ = "number"
                else:
                    typ = "array"
                key = (n["tool"], p)
                if key in seen and seen[key] != typ:
                    typ = "number" if {seen[key], typ} <= {"integer", "number"} else "string"
                seen[key] = typ
        for (tool, p), typ in seen.items():
            self.tools[tool]["parameters"]["properties"][p]["type"] = typ
            desc = self.tools[tool]["description"]
            head = f"'{p}' ("
            i = desc.find(head)
            if i >= 0:
                j = desc.find(",", i)
                self.tools[tool]["description"] = desc[: i + len(head)] + typ + desc[j:]

    def finish(self, goal: str) -> dict[str, Any]:
        rng, d, slot = self.rng, self.domain, self.slot
        order = plans.linearize(self.nodes, rng)
        self.reconcile_types()
        # neutral tools + Finish
        neutral = []
        purposes: dict[str, tuple[str, str]] = {}  # neutral tool -> (capability, what it does)
        # usable but unneeded in-domain tools: 1 or 2 (mean 5/3), so a case lists 9.4 tools on average
        # beside Finish as the paper's augmented cases do (App. B.1); the spec's U{2..5} gave 11.2
        for words, purpose, pname, pdesc in rng.sample(list(NEUTRAL_TOOLS), rng.choices((1, 2), weights=(1, 2))[0]):
            name = self.name(words)
            if name in self.tools:
                continue
            cap = f"neutral:{'_'.join(split_words(words))}"
            purposes[name] = (cap, purpose)
            tool = make_tool(name, f"Does {purpose}.", [param_entry(pname, "string", True, pdesc)],
                             "a JSON object with 'result'.", caps=[cap],
                             words=split_words(words))
            tool["hidden"]["neutral"] = True
            self.tools[name] = tool
            neutral.append(name)
        tools = list(self.tools.values())
        rng.shuffle(tools)
        tools.append(finish_tool())
        # constraints (0-3)
        nmap = plans.node_map(self.nodes)
        pool = []
        if neutral:
            pool.append({"id": "", "type": "forbid_tool", "spec": {"tools": [neutral[0]]},
                         "text": f"Do not use {neutral[0]}."})
        cn = self.extra["compute_node"]
        pool.append({"id": "", "type": "param_equals", "spec": {"node": cn, "param": "rate", "value": self.extra["rate"]},
                     "text": f"The {self.extra['rate_text']} rate must be applied exactly."})
        pool.append({"id": "", "type": "param_equals", "spec": {"node": goal, "param": "format", "value": self.extra["fmt"]},
                     "text": f"The deliverable must be in {self.extra['fmt']} format."})
        pool.append({"id": "", "type": "final_node", "spec": {"node": goal},
                     "text": f"Producing the {self.deliverable} must be the last step."})
        heads = [nid for nid in order if nmap[nid]["cap"].startswith("acquire:")]
        if len(heads) >= 2:
            a, b = heads[0], heads[1]
            ea, eb = (nmap[x]["args"][d.entity_param]["value"] for x in (a, b))
            pool.append({"id": "", "type": "order", "spec": {"before": a, "after": b},
                         "text": f"Look up {ea} before {eb}."})
            tool = nmap[a]["tool"]
            pool.append({"id": "", "type": "max_calls", "spec": {"tool": tool, "n": len(heads)},
                         "text": f"Call {tool} at most {len(heads)} times (once per {d.entity_param})."})
            per_item = sum(nmap[x]["tool"] == tool for x in heads)
            if per_item >= 2:  # the batching failure of Fig. 46: one call for several items
                pool.append({"id": "", "type": "per_item", "spec": {"tool": tool, "n": per_item},
                             "text": f"Look up each {d.entity_param} individually, one {tool} call each."})
        if "range_node" in self.extra:
            node, param, lo, hi = self.extra["range_node"]
            pool.append({"id": "", "type": "param_range", "spec": {"node": node, "param": param, "min": lo, "max": hi},
                         "text": f"The {param} must lie between {lo} and {hi}."})
        if len(neutral) >= 2:
            cap, purpose = purposes[neutral[-1]]
            pool.append({"id": "", "type": "forbid_capability", "spec": {"cap": cap},
                         "text": f"Do not use any tool for {purpose}."})
        constraints = rng.sample(pool, rng.randint(0, 3))
        for i, c in enumerate(constraints):
            c["id"] = f"c{i + 1}"
        # the query: intro + ordered clauses + constraint sentences
        connectors = ["First", "Then", "Next", "After that", "Also"]
        clauses = []
        for i, nid in enumerate(order):
            word = "Finally" if i == len(order) - 1 else connectors[min(i, len(connectors) - 1)]
            clauses.append(f"{word}, {nmap[nid]['nl']}.")
        files = [f["name"] for f in self.files]
        intro = f"I need help with {_a(d.name.lower())} task"
        intro += f" using {', '.join(files)}." if files else "."
        query = " ".join([intro, *clauses, *[c["text"] for c in constraints]])
        system = SYSTEM_PROMPTS[slot.source] + " " + PERCEPTION_SENTENCE
        secrets = {f"{n['id']}.{k}": v for n in self.nodes for k, v in n["output"].items()}
        base_id = f"apb-g{self.gen_seed}-base-{slot.index:05d}"
        case = {
            "base_id": base_id,
            "index": slot.index,
            "generator_version": GENERATOR_VERSION,
            "source_style": slot.source,
            "domain": d.name,
            "modality": slot.modality,
            "system_prompt": system,
            "query": query,
            "background": {"files": self.files},
            "tools": tools,
            "constraints": constraints,
            "world": {"secrets": secrets},
            "reference": {
                "nodes": self.nodes,
                "goal_node": goal,
                "linearization": order,
                "plan": plans.plan_text(self.nodes, order),
                "tool_chain": [{"name": nmap[n]["tool"], "reason": f"To {nmap[n]['nl']}."} for n in order],
                "trajectory": plans.reference_trajectory(self.nodes, order),
            },
            "meta": {"L": len(self.nodes), "rate_text": self.extra["rate_text"], "compute_node": cn,
                     "neutral_tools": neutral, "entities": self.extra["entities"]},
        }
        return case


def sim_table(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The world's call table: canonical (tool, args) -> observation."""
    nodes = plans.node_map(case["reference"]["nodes"])
    return {canonical_json([n["tool"], plans.resolve_args(n, nodes)]): n["output"] for n in case["reference"]["nodes"]}


def simulate(case: dict[str, Any], tool: str, args: dict[str, Any],
             table: dict[str, dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """SIM[tool](args, world): the deterministic observation of a call (None if no node matches)."""
    out = (table if table is not None else sim_table(case)).get(canonical_json([tool, args]))
    return dict(out) if out is not None else None


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _secret_in(text: str, value: Any) -> bool:
    if isinstance(value, list):
        return any(_secret_in(text, v) for v in value)
    s = str(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return s in _NUMBER.findall(text)
    return s.lower() in text.lower()


def quality_problems(case: dict[str, Any]) -> list[str]:
    """§3.5 checks; an empty list means the case passes."""
    problems = []
    ref = case["reference"]
    for key in ("query", "trajectory", "tools"):
        if key not in case and key not in ref:
            problems.append(f"missing field {key}")
    names = [t["name"] for t in case["tools"]]
    if len(set(names)) != len(names) or len({n.lower() for n in names}) != len(names):
        problems.append("tool names not unique")
    tools = {t["name"]: t for t in case["tools"]}
    for msg in ref["trajectory"]:
        for call in msg.get("tool_calls") or []:
            fn = call["function"]
            if fn["name"] not in tools:
                problems.append(f"trajectory calls {fn['name']} not in tools")
            elif not validate_call(tools[fn["name"]], fn["arguments"]):
                problems.append(f"call to {fn['name']} fails its schema")
    nodes = ref["nodes"]
    if not plans.is_acyclic(nodes):
        problems.append("DAG has a cycle")
    for n in nodes:
        for spec in n["args"].values():
            if any(s not in n["deps"] for s in plans.spec_sources(spec)):
                problems.append(f"{n['id']} references a node outside deps")
    if not plans.is_topological(nodes, ref["linearization"]):
        problems.append("linearization is not topological")
    nmap = plans.node_map(nodes)
    table = sim_table(case)
    for n in nodes:
        args = plans.resolve_args(n, nmap)
        first = simulate(case, n["tool"], args, table)
        if first is None or first != simulate(case, n["tool"], args, table):
            problems.append("simulator not deterministic")
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n["tool"]] = counts.get(n["tool"], 0) + 1
    if len(nodes) > 1 and max(counts.values()) * 2 >= len(nodes):
        problems.append("a tool covers >= 50% of the nodes")
    consumers = {d for n in nodes for d in n["deps"]}
    for n in nodes:
        if not n["goal"] and n["id"] not in consumers:
            problems.append(f"{n['id']} has no consumer")
        for spec in n["args"].values():
            if spec["kind"] == "const" and spec["goal_slot"] and str(spec["value"]) not in case["query"]:
                problems.append(f"goal slot {spec['value']!r} not in the query")
    for f in case["background"]["files"]:
        for v in case["world"]["secrets"].values():
            if _secret_in(f["caption"], v):
                problems.append(f"caption of {f['name']} leaks a secret")
    for c in case["constraints"]:
        if c["type"] == "param_equals":
            n = nmap[c["spec"]["node"]]
            if n["args"][c["spec"]["param"]]["value"] != c["spec"]["value"]:
                problems.append(f"constraint {c['id']} not satisfied by the reference")
        if c["type"] == "forbid_tool" and any(nmap[x]["tool"] in c["spec"]["tools"] for x in nmap):
            problems.append(f"constraint {c['id']} not satisfied by the reference")
        if c["type"] == "order":
            lin = ref["linearization"]
            if lin.index(c["spec"]["before"]) > lin.index(c["spec"]["after"]):
                problems.append(f"constraint {c['id']} not satisfied by the reference")
        if c["type"] == "max_calls" and sum(n["tool"] == c["spec"]["tool"] for n in nodes) > c["spec"]["n"]:
            problems.append(f"constraint {c['id']} not satisfied by the reference")
        if c["type"] == "param_range":
            got = nmap[c["spec"]["node"]]["args"][c["spec"]["param"]]["value"]
            if not c["spec"]["min"] <= got <= c["spec"]["max"]:
                problems.append(f"constraint {c['id']} not satisfied by the reference")
        if c["type"] == "per_item" and sum(n["tool"] == c["spec"]["tool"] for n in nodes) < c["spec"]["n"]:
            problems.append(f"constraint {c['id']} not satisfied by the reference")
        if c["type"] == "forbid_capability" and any(
                c["spec"]["cap"] in tools[n["tool"]]["hidden"]["capabilities"] for n in nodes):
            problems.append(f"constraint {c['id']} not satisfied by the reference")
        if c["type"] == "final_node" and ref["linearization"][-1] != c["spec"]["node"]:
            # the goal node is a sink; every linearization can put it last, make it so
            problems.append(f"constraint {c['id']} not satisfied by the reference")
    return problems


def build_base(gen_seed: int, slot: Slot) -> dict[str, Any]:
    for attempt in range(20):
        rng = case_rng(gen_seed, "base", slot.index if attempt == 0 else f"{slot.index}#r{attempt}")
        case = _Builder(slot, rng, gen_seed).build()
        if not quality_problems(case):
            return case
    raise RuntimeError(f"base {slot.index} failed quality checks: {quality_problems(case)}")


# ----------------------------------------------------------------------------- subsets

def stratified_draw(gen_seed: int, stream: str, bases: list[dict[str, Any]], n: int,
                    eligible: Any = None) -> list[int]:
    """A seeded subset of base indices, stratified by source in proportion to Tab. 10."""
    pool = [b for b in bases if eligible is None or eligible(b)]
    by_src: dict[str, list[int]] = {}
    for b in pool:
        by_src.setdefault(b["source_style"], []).append(b["index"])
    total = len(pool)
    quotas = {s: n * len(v) / total for s, v in by_src.items()}
    take = {s: int(q) for s, q in quotas.items()}
    rest = n - sum(take.values())
    for s in sorted(quotas, key=lambda s: (-(quotas[s] - take[s]), s))[:rest]:
        take[s] += 1
    chosen = []
    for s in sorted(by_src):
        rng = case_rng(gen_seed, stream, s)
        chosen.extend(rng.sample(by_src[s], take[s]))
    return sorted(chosen)


def cut_points(L: int) -> dict[str, int]:
    """§4.2: middle, early and late cut positions j (number of completed reference steps)."""
    j_mid = max(1, min(L // 2, L - 2))
    return {"middle": j_mid, "early": max(1, L // 5), "late": min(L - 1, max(j_mid + 1, math.ceil(0.8 * L)))}


# ----------------------------------------------------------------------------- variants

def distractor_pool(bases: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], int]]]:
    """Every tool the generator made for some base, by domain: (tool, in how many bases), one per word
    sequence, in base order."""
    pool: dict[str, dict[tuple[str, ...], list[Any]]] = {}
    for b in bases:
        for t in b["tools"]:
            if t["name"] != FINISH:
                entry = pool.setdefault(b["domain"], {}).setdefault(tuple(t["hidden"]["words"]), [t, 0])
                entry[1] += 1
    return {d: [(t, n) for t, n in v.values()] for d, v in pool.items()}


def balanced_pool(gen_seed: int, bases: list[dict[str, Any]], sample: list[int],
                  rounds: int | None = None) -> dict[str, list[tuple[dict[str, Any], float]]]:
    """The pool of the sample's tools, each weighted so that the sample's draws make it a distractor
    about as often, relative to the others, as the sample lists it (iterative proportional fitting
    over whole draws). A tool drawn more or less often than it is listed tells a reader its role."""
    pool = distractor_pool([bases[i] for i in sample])
    listed = {(d, tuple(t["hidden"]["words"])): float(n) for d, v in pool.items() for t, n in v}
    weights = dict(listed)

    def weighted() -> dict[str, list[tuple[dict[str, Any], float]]]:
        return {d: [(t, weights[(d, tuple(t["hidden"]["words"]))]) for t, _ in v] for d, v in pool.items()}

    for _ in range(DISTRACTOR_FIT_ROUNDS if rounds is None else rounds):
        drawn = dict.fromkeys(listed, 0)
        current = weighted()
        for i in sample:
            for home, t in _draw_distractors(gen_seed, bases[i], current):
                drawn[(home, tuple(t["hidden"]["words"]))] += 1
        ratio = sum(drawn.values()) / sum(listed.values())
        # damped multiplicative steps (a tool's capability may exclude it from many draws)
        weights = {k: weights[k] * ((ratio * listed[k] + 0.5) / (drawn[k] + 0.5)) ** 0.7 for k in listed}
    return weighted()


def _draw_distractors(gen_seed: int, base: dict[str, Any], pool: dict[str, list[tuple[dict[str, Any], float]]],
                      count: int = 10) -> list[tuple[str, dict[str, Any]]]:
    """`distractors_for`'s draw: the chosen pool tools with the domain each came from."""
    rng = case_rng(gen_seed, "extraneous", base["index"])
    style = SOURCE_STYLE[base["source_style"]]
    api = DOMAIN_BY_NAME[base["domain"]].api
    taken = {t["name"].lower() for t in base["tools"]}
    words = {tuple(t["hidden"]["words"]) for t in base["tools"]}
    caps = {c for t in base["tools"] for c in t["hidden"]["capabilities"]}
    descriptions = {t["description"] for t in base["tools"]}
    openings: set[str] = set()  # of the distractors: each shares its opening with one listed tool at most

    def by_use(entries: list[tuple[str, dict[str, Any], float]]) -> list[tuple[str, dict[str, Any]]]:
        # a weighted draw without replacement (Efraimidis-Spirakis keys)
        keyed = sorted(((rng.random() ** (1.0 / n), i), d, t) for i, (d, t, n) in enumerate(entries))
        return [(d, t) for _, d, t in keyed[::-1]]

    def candidates() -> Iterator[tuple[str, dict[str, Any]]]:
        yield from by_use([(base["domain"], t, n) for t, n in pool.get(base["domain"], [])])
        # the other domains' keys are drawn only when the domain runs out (nothing else reads `rng`)
        yield from by_use([(d, t, n) for d in sorted(pool) if d != base["domain"] for t, n in pool[d]])

    out: list[tuple[str, dict[str, Any]]] = []
    for home, t in candidates():
        w = tuple(t["hidden"]["words"])
        name = style_name(list(w), style, api)
        if w in words or name.lower() in taken or set(t["hidden"]["capabilities"]) & caps \
                or t["description"] in descriptions or t["description"][:30] in openings:
            continue  # two tools with one description (or three with one opening) tell an addition
        words.add(w)
        descriptions.add(t["description"])
        openings.add(t["description"][:30])
        taken.add(name.lower())
        out.append((home, {**t, "name": name}))
        if len(out) == count:
            return out
    raise RuntimeError(f"fewer than {count} distractors for {base['base_id']}")


def distractors_for(gen_seed: int, base: dict[str, Any], pool: dict[str, list[tuple[dict[str, Any], float]]],
                    count: int = 10) -> list[dict[str, Any]]:
    """Same-scenario but useless tools (§4.3): no capability overlap, distinct names, nested levels.

    Drawn from the tools the generator made for the extraneous bases (the same domain first, then the
    others), weighted by `balanced_pool`, renamed in this case's style: a distractor is worded by the
    process that words the needed tools, so only the query tells it is not needed. Until apb-gen-4
    they came from their own templates (one parameter `item_id`, one return sentence), which told them
    apart without reading the query."""
    return [{"name": t["name"], "description": t["description"], "parameters": t["parameters"],
             "hidden": {**t["hidden"], "kind": "distractor", "neutral": False}}
            for _, t in _draw_distractors(gen_seed, base, pool, count)]


def _renamed_parameters(description: str, parameters: dict[str, Any],
                        rename: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A tool's description and schema with its parameters renamed (PARAM_SYNONYMS, G7: "vary parameter
    names slightly")."""
    for p, q in rename.items():
        description = description.replace(f"'{p}'", f"'{q}'")
    props = {rename[p]: v for p, v in parameters["properties"].items()}
    return description, {"type": "object", "properties": props, "required": [rename[p] for p in parameters["required"]]}


def broken_variant(gen_seed: int, base: dict[str, Any]) -> dict[str, Any]:
    """§4.4: pick step j, build the replacement tool t'_j and the reference recovery action."""
    rng = case_rng(gen_seed, "broken", base["index"])
    ref = base["reference"]
    nodes = plans.node_map(ref["nodes"])
    order = ref["linearization"]
    L = len(order)
    tools = {t["name"]: t for t in base["tools"]}
    counts: dict[str, int] = {}
    for n in ref["nodes"]:
        counts[n["tool"]] = counts.get(n["tool"], 0) + 1
    children = {nid: [m["id"] for m in ref["nodes"] if nid in m["deps"]] for nid in nodes}
    style = SOURCE_STYLE[base["source_style"]]
    api = DOMAIN_BY_NAME[base["domain"]].api
    avoid = {t.lower() for t in tools}

    def ok(pos: int) -> str | None:
        n = nodes[order[pos]]
        if counts[n["tool"]] != 1 or not children[n["id"]] or n["tool"] == FINISH:
            return None
        return replacement_name(tools[n["tool"]]["hidden"]["words"], style, api, avoid)

    start = max(2, L // 3) - 1  # 0-based position of the first allowed step
    positions = list(range(start, L)) + list(range(0, start))
    for pos in positions:
        new_name = ok(pos)
        if new_name:
            break
    else:
        raise RuntimeError(f"no breakable step in {base['base_id']}")
    node = nodes[order[pos]]
    orig = tools[node["tool"]]
    rename = {p: PARAM_SYNONYMS.get(p, p) for p in orig["parameters"]["properties"]}
    desc, schema = _renamed_parameters(orig["description"], orig["parameters"], rename)
    # The step's two wordings, the base's and the synonyms', and which of them is listed as the broken
    # tool is a coin's: the synonym wording is longer (names and parameters) in most cases, so a
    # replacement always worded that way was the longer of the pair (apb-gen-4: 260 of 300 names).
    other = {"name": new_name, "description": desc, "parameters": schema, "hidden": dict(orig["hidden"])}
    swapped = case_rng(gen_seed, "broken_wording", base["index"]).random() < 0.5
    args = plans.resolve_args(node, nodes)
    if swapped:  # the synonym wording breaks; the base's own tool is the replacement
        failing, failed_args = other, {rename[p]: v for p, v in args.items()}
        repl = {**orig, "hidden": {**orig["hidden"], "kind": "replacement", "replaces": new_name,
                                   "param_map": {p: p for p in rename}}}
        arg_map = {rename[p]: p for p in rename}
        new_args = dict(args)
    else:
        failing, failed_args = orig, dict(args)
        repl = {**other, "hidden": {**other["hidden"], "kind": "replacement", "replaces": orig["name"],
                                    "param_map": rename}}
        arg_map = dict(rename)
        new_args = {rename[p]: v for p, v in args.items()}
    error = f"Error: Tool '{failing['name']}' is currently broken and cannot be used (503 Service Unavailable)."
    prefix = ref["trajectory"][: 2 * pos] + [
        plans.assistant_call(f"I will {node['nl']}.", failing["name"], failed_args),
        {"role": "tool", "name": failing["name"], "content": error},
    ]
    insert_at = rng.randint(0, len(base["tools"]) - 1)
    out = {"j": pos + 1, "broken_node": node["id"], "broken_tool": failing["name"], "replacement_tool": repl,
           "insert_at": insert_at, "error_observation": error, "prefix": prefix, "arg_map": arg_map,
           "reference_action": plans.assistant_call(f"The tool failed; I will use {repl['name']} instead.",
                                                    repl["name"], new_args)}
    if swapped:
        out["listed_broken_tool"] = {**other, "hidden": {**other["hidden"], "kind": "original"}}
    return out


def broken_twin(base: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    """The Tool-Broken case's twin: the same list (the replacement in it) and the same call at step j,
    which succeeds and shows the step's output; the right answer is the next step. Beside its case, a
    policy that switches tools without reading the error earns the case and loses the twin."""
    pos = variant["j"] - 1
    trajectory = variant["prefix"][:-1] + [{**variant_output(base, pos), "name": variant["broken_tool"]}]
    keep = ("broken_node", "broken_tool", "replacement_tool", "insert_at", "listed_broken_tool", "lookalikes")
    return {"kind": "stepwise", "twin_of": "broken", "k": 1, "j": variant["j"], "stage": "broken",
            "prefix": trajectory, **{k: variant[k] for k in keep if k in variant}}


_OPERATION = re.compile(r"^Does (\w+(?: processing)?) of ")


def lookalike_steps(base: dict[str, Any]) -> dict[str, int]:
    """Per operation class (a LOOKALIKE_OPERATIONS key), the first step (0-based) the look-alike layout can
    break: a tool the plan calls once, whose output a later step needs, after the first step (F.3: the
    tool "was successfully invoked in earlier trajectory steps"), described as "Does <operation> of ..."."""
    ref = base["reference"]
    nodes = plans.node_map(ref["nodes"])
    tools = {t["name"]: t for t in base["tools"]}
    counts: dict[str, int] = {}
    for n in ref["nodes"]:
        counts[n["tool"]] = counts.get(n["tool"], 0) + 1
    needed = {d for n in ref["nodes"] for d in n["deps"]}
    out: dict[str, int] = {}
    for pos, nid in enumerate(ref["linearization"]):
        tool = tools.get(nodes[nid]["tool"])
        if pos == 0 or tool is None or counts[tool["name"]] != 1 or nid not in needed:
            continue
        cls = tool["hidden"]["words"][0] if tool["hidden"]["words"] else ""
        if cls in LOOKALIKE_OPERATIONS and _OPERATION.match(tool["description"]):
            out.setdefault(cls, pos)
    return out


def _reworded(tool: dict[str, Any], gerund: str, rename: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The description and schema of a look-alike of `tool`: its operation said with `gerund`, its
    parameters renamed."""
    desc = _OPERATION.sub(f"Does {gerund} of ", tool["description"], count=1)
    return _renamed_parameters(desc, tool["parameters"], rename)


def lookalike_variant(gen_seed: int, base: dict[str, Any], pos: int, weights: dict[str, float]) -> dict[str, Any]:
    """A Tool-Broken case with look-alikes: the broken tool t_j listed as the base lists it, and beside it
    LOOKALIKES + 1 tools that each read as t_j reworded (another name, renamed parameters, the operation
    said in another word). One of them, the replacement, names an operation of t_j's own class: the same
    job (G7: "the EXACT SAME purpose"). Each of the others names an operation of another class, drawn in
    proportion to `weights` (how often each class breaks), so a word is as often a look-alike's as the
    replacement's, and no string rule over the list tells which one does the job: only what the words mean."""
    rng = case_rng(gen_seed, "lookalike", base["index"])
    ref = base["reference"]
    nodes = plans.node_map(ref["nodes"])
    node = nodes[ref["linearization"][pos]]
    tools = {t["name"]: t for t in base["tools"]}
    broken = tools[node["tool"]]
    cls, rest = broken["hidden"]["words"][0], broken["hidden"]["words"][1:]
    style, api = SOURCE_STYLE[base["source_style"]], DOMAIN_BY_NAME[base["domain"]].api
    avoid = {t.lower() for t in tools}
    rename = {p: PARAM_SYNONYMS.get(p, p) for p in broken["parameters"]["properties"]}
    near = set().union(*(g for g in LOOKALIKE_NEAR if cls in g)) | {cls}
    others = [c for c in sorted(LOOKALIKE_OPERATIONS) if c not in near]
    # a weighted draw without replacement (Efraimidis-Spirakis keys)
    others.sort(key=lambda c: -rng.random() ** (1 / weights.get(c, 1e-3)))
    suffixes = list(LOOKALIKE_SUFFIXES)
    rng.shuffle(suffixes)
    made: list[dict[str, Any]] = []
    for c in [cls, *others[:LOOKALIKES]]:
        gerund = rng.choice(LOOKALIKE_OPERATIONS[c])
        for k, sfx in enumerate(suffixes):
            if name := lookalike_name(rest, sfx, style, api, avoid):
                del suffixes[k]
                break
        else:
            raise RuntimeError(f"{base['base_id']}: no free name for a look-alike of {broken['name']}")
        avoid.add(name.lower())
        desc, schema = _reworded(broken, gerund, rename)
        if c == cls:
            hidden = {**broken["hidden"], "kind": "replacement", "replaces": broken["name"], "param_map": rename}
        else:
            hidden = {"capabilities": [f"lookalike:{c}"], "kind": "lookalike", "cost": None, "covers": None,
                      "imitates": broken["name"], "param_map": rename}
        made.append({"name": name, "description": desc, "parameters": schema,
                     "hidden": {**hidden, "words": [*rest, gerund]}})
    repl, decoys = made[0], made[1:]
    n_listed = len(base["tools"])
    insert_at = rng.randint(0, n_listed - 1)  # before Finish, as the paper layout's replacement
    lookalikes = []
    for d in decoys:
        n_listed += 1
        lookalikes.append({"tool": d, "at": rng.randint(0, n_listed - 1)})
    args = plans.resolve_args(node, nodes)
    error = f"Error: Tool '{broken['name']}' is currently broken and cannot be used (503 Service Unavailable)."
    prefix = ref["trajectory"][: 2 * pos] + [
        plans.assistant_call(f"I will {node['nl']}.", broken["name"], args),
        {"role": "tool", "name": broken["name"], "content": error},
    ]
    new_args = {rename[p]: v for p, v in args.items()}
    return {"j": pos + 1, "broken_node": node["id"], "broken_tool": broken["name"], "replacement_tool": repl,
            "insert_at": insert_at, "lookalikes": lookalikes, "error_observation": error, "prefix": prefix,
            "arg_map": dict(rename),
            "reference_action": plans.assistant_call(f"The tool failed; I will use {repl['name']} instead.",
                                                     repl["name"], new_args)}


def lookalike_cases(gen_seed: int, bases: list[dict[str, Any]], sample: list[int]) -> list[dict[str, Any]]:
    """The look-alike layout's Tool-Broken cases of the bases in `sample`. Which step breaks is drawn per
    case over the operation classes it has, each weighted by how rarely a case has it, so no class
    breaks in most cases (in the first-step choice of `broken_variant`, 'compare' broke in 186 of 300):
    a class's words could not then be as often a look-alike's as the replacement's."""
    steps = {i: lookalike_steps(bases[i]) for i in sample}
    having: dict[str, int] = {}
    for s in steps.values():
        for c in s:
            having[c] = having.get(c, 0) + 1
    chosen = {}
    for i in sample:
        if not steps[i]:
            raise RuntimeError(f"{bases[i]['base_id']}: no step the look-alike layout can break")
        classes = sorted(steps[i])
        chosen[i] = case_rng(gen_seed, "lookalike_step", i).choices(classes, [1 / having[c] for c in classes])[0]
    broke: dict[str, float] = {}
    for c in chosen.values():
        broke[c] = broke.get(c, 0) + 1
    return [lookalike_variant(gen_seed, bases[i], steps[i][chosen[i]], broke) for i in sample]


def broken_listing(tools: list[dict[str, Any]], case: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools a Tool-Broken case (or its twin) lists, from its base's: the wording that breaks in the
    step's place (`broken_variant`), the replacement at `insert_at`, then each look-alike at its place
    (`lookalike_variant`)."""
    tools = list(tools)
    if case.get("listed_broken_tool"):
        tools = [case["listed_broken_tool"] if x["name"] == case["replacement_tool"]["name"] else x for x in tools]
    tools.insert(case["insert_at"], case["replacement_tool"])
    for x in case.get("lookalikes", ()):
        tools.insert(x["at"], x["tool"])
    return tools


def variant_output(base: dict[str, Any], pos: int) -> dict[str, Any]:
    """The tool message of the reference trajectory's step `pos` (0-based)."""
    message = base["reference"]["trajectory"][2 * pos + 1]
    if message.get("role") != "tool":
        raise RuntimeError(f"{base['base_id']}: step {pos + 1} of the reference trajectory has no tool output")
    return dict(message)


PERCEPTION_CAPS = ("count", "ocr", "detect", "click", "type", "classify", "emotion", "describe", "choose_frames")
TOOL_REMOVAL_SENTENCES = {
    "count": ("For audit compliance, the count must be generated by a verified counting tool. Visual estimates are strictly prohibited.", ["count", "counting"]),
    "ocr": ("For audit compliance, every figure must be transcribed by a verified text-recognition tool. Reading the image manually is not accepted.", ["text recognition", "ocr", "text-recognition", "transcribe"]),
    "detect": ("The locations must come from a certified detection tool; eyeballing the content is not accepted.", ["detect", "detection"]),
    "click": ("All interface interactions must be executed through registered interaction handlers; simulated or manual input is not accepted.", ["click", "interaction"]),
    "type": ("All text entry must go through a registered input handler; pasted or simulated input is not accepted.", ["type", "typing", "text entry", "input"]),
    "classify": ("The environment label must be produced by a certified scene classifier; personal judgement is not accepted.", ["classif", "environment"]),
    "emotion": ("Emotional states must be assessed by a validated affect-analysis tool; subjective impressions are not accepted.", ["emotion", "affect"]),
    "describe": ("The scene description must be produced by a certified description tool; your own viewing is not accepted.", ["descri"]),
    "choose_frames": ("Frames must be selected by a certified frame-selection tool; manual scrubbing is not accepted.", ["frame"]),
}
INFO_STRATEGIES = (
    ("A", "the rate we discussed in the morning meeting", ["morning meeting", "rate", "discussed"]),
    ("B", "the standard rate listed in the employee handbook", ["handbook", "rate"]),
    ("C", "the rate for items eligible for the 'Employee Friends & Family' discount", ["friends & family", "eligible", "rate"]),
)


def unsolvable_eligible(base: dict[str, Any]) -> bool:
    """A visual base with a perception/action node whose capability can be removed."""
    return base["modality"] != "text" and any(n["cap"] in PERCEPTION_CAPS for n in base["reference"]["nodes"])


# What each perception/action capability yields, as a requirement names it (the conflict gate).
CAP_NOUNS = {"count": "count", "ocr": "transcribed text", "detect": "object locations", "click": "interface action",
             "type": "text entry", "classify": "environment label", "emotion": "emotional assessment",
             "describe": "scene description", "choose_frames": "frame selection"}
GATE_KINDS = ("conflict", "info", "tool")


def _conflict_sentence(style: str, tool: str, cap: str) -> str:
    m = CAP_NOUNS[cap]
    if style in ("FrameThinker", "GAIA"):
        return (f"The {m} must come from the {tool} tool, which reads the layer the images do not show; visual "
                f"inspection alone is insufficient, and the task cannot be completed without it.")
    if style == "OpenCUA":
        return (f"Because the page state changes dynamically, every {m} must go through {tool}; without it the "
                f"displayed state is untrustworthy, and the task cannot be completed without it.")
    return (f"For official audit, the {m} must be produced and signed by the {tool} tool. Unverified visual "
            f"estimates are strictly prohibited by law, and the task cannot be completed without it.")


def _ref_code(rng: random.Random) -> str:
    """The code of a private note an info case points to ("KQX-417"): some 16 million codes, so a code
    seen in one case tells nothing about another."""
    return "".join(rng.choice("BCDFGHJKLMNPQRSTVWXZ") for _ in range(3)) + f"-{rng.randrange(100, 1000)}"


# A second name for the perception tools the synonym tables cannot rename (words -> words).
PERCEPTION_ALIASES = {("click",): ["tap"], ("doubleclick",): ["double", "tap"], ("write",): ["enter", "text"],
                      ("object", "detector"): ["object", "locator"], ("ocr",): ["text", "reader"],
                      ("image", "description"): ["picture", "captioner"]}


def alias_name(tool: dict[str, Any], base: dict[str, Any]) -> str:
    """Another name for a listed tool, in the base's naming style, clashing with no listed name."""
    style = SOURCE_STYLE[base["source_style"]]
    api = DOMAIN_BY_NAME[base["domain"]].api
    avoid = {t["name"].lower() for t in base["tools"]}
    words = list(tool["hidden"]["words"])
    name = replacement_name(words, style, api, avoid)
    if name is None and tuple(words) in PERCEPTION_ALIASES:
        name = style_name(PERCEPTION_ALIASES[tuple(words)], style, api)
    if name is None or name.lower() in avoid:
        raise RuntimeError(f"no second name for {tool['name']} in {base['base_id']}")
    return name


def renamed_base(base: dict[str, Any], renamed: dict[str, str]) -> dict[str, Any]:
    """A base whose listed tools `renamed` carry their other names: in the tool list, the reference
    nodes, the reference chain and the trajectory, so plans and grading read the listed names."""
    if not renamed:
        return base
    r = lambda name: renamed.get(name, name)  # noqa: E731
    ref = base["reference"]
    trajectory = []
    for m in ref["trajectory"]:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"], "name": r(c["function"]["name"])}}
                               for c in m["tool_calls"]]
        if m.get("name"):
            m["name"] = r(m["name"])
        trajectory.append(m)
    return {**base,
            "tools": [{**t, "name": r(t["name"])} for t in base["tools"]],
            "reference": {**ref,
                          "nodes": [{**n, "tool": r(n["tool"]), "alt_tools": [r(a) for a in n["alt_tools"]]}
                                    for n in ref["nodes"]],
                          "tool_chain": [{**c, "name": r(c["name"])} for c in ref["tool_chain"]],
                          "trajectory": trajectory}}


def _info_note(ref: str, value: str) -> str:
    return f"For reference, the rate recorded under ref. {ref} is {value}."


def unsolvable_gate(gen_seed: int, base: dict[str, Any], kind: str) -> dict[str, Any]:
    """The visible edit of a gated case (conflict, info, tool), drawn before its role is known.

    The Unsolvable case and its solvable twin (`unsolvable_control`) read the same requirement; what
    differs is the world: the twin lists the tool the requirement names (or gives the value the query
    refers to), the Unsolvable case does not. Fixed phrases that only unsolvable cases carried ("is
    currently offline", "we discussed", apb-gen-4) told them apart without reading the tool list."""
    rng = case_rng(gen_seed, "unsolvable", f"{base['index']}|{kind}")
    nodes = base["reference"]["nodes"]
    if kind in ("conflict", "tool"):
        cap = rng.choice(sorted({n["cap"] for n in nodes if n["cap"] in PERCEPTION_CAPS}))
        tool = next(n["tool"] for n in nodes if n["cap"] == cap)
        if kind == "conflict":
            # The step's tool has two names, the base's and another; a coin lists one of them (in both
            # twins). The twin's requirement names the listed one, the Unsolvable case's the other, so the
            # two lists are the same and the named tools are drawn alike: only whether the named tool is
            # listed differs. Until apb-gen-5 the Unsolvable list lacked the tool (the probe read 0.937).
            other = alias_name(next(t for t in base["tools"] if t["name"] == tool), base)
            renamed = rng.random() < 0.5
            listed, unlisted = (other, tool) if renamed else (tool, other)
            return {"cap": cap, "sentence": _conflict_sentence(base["source_style"], listed, cap),
                    "unsolvable_sentence": _conflict_sentence(base["source_style"], unlisted, cap),
                    "terms": [unlisted], "mandatory_tool": unlisted, "step_tool": tool,
                    "renamed": {tool: other} if renamed else {}}
        sentence, terms = TOOL_REMOVAL_SENTENCES[cap]
        return {"cap": cap, "sentence": sentence, "terms": terms, "capability": cap}
    if kind == "info":
        strat, phrase, terms = INFO_STRATEGIES[rng.randrange(len(INFO_STRATEGIES))]
        value = base["meta"]["rate_text"]
        ref, other_ref = _ref_code(rng), _ref_code(rng)
        decoy = rng.choice([r for r in RATE_TEXTS if r != value])
        return {"strategy": strat, "phrase": f"{phrase} (ref. {ref})", "terms": terms, "removed_value": value,
                "note": _info_note(ref, value), "decoy_note": _info_note(other_ref, decoy)}
    raise ValueError(f"unknown gate kind {kind!r}")


def _file_kind(base: dict[str, Any]) -> str:
    """What a base's first file is (image, screenshot, video): a visual case borrows files of its kind."""
    return base["background"]["files"][0]["name"].split("_")[0]


def retired_lookalike(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool case's look-alike of a tool with the removed capability: the same words, parameters and
    description, its name prefixed `legacy_`, stated to answer no call. Both twins list it where the tool
    stood; the twin also lists the tool itself after it, the Unsolvable case does not.

    Dropped alone (apb-gen-5), the removed tool took its words out of the list, and those words told
    the Unsolvable case (the probe read 0.907); with the look-alike the two lists carry the same words,
    and only the sentence that says the look-alike answers nothing tells whether the capability is there."""
    words = ["legacy", *tool["hidden"]["words"]]
    return {"name": f"legacy_{tool['name']}",
            "description": f"{tool['description']} Retired: it answers no call and is listed for old scripts only.",
            "parameters": tool["parameters"],
            "hidden": {**tool["hidden"], "capabilities": [], "kind": "original", "neutral": True, "words": words}}


def gated_case(base: dict[str, Any], kind: str, gate: dict[str, Any], solvable: bool) -> dict[str, Any]:
    """Query, files and tools of a gated case; `solvable` decides the world, never the wording."""
    query, files, tools = base["query"], base["background"]["files"], list(base["tools"])
    removed: list[str] = []
    if kind == "info":
        # Both twins refer to the value by a private note's code and close with one note's rate: the
        # twin's note is the one the query refers to, the Unsolvable case's another (with another rate).
        # Until apb-gen-5 only the twin carried a value ("(5%)"), and its digits told it apart.
        rate_text = gate["removed_value"]
        query = query.replace(f"a {rate_text} rate", gate["phrase"]).replace(f"The {rate_text} rate", "That rate")
        query = f"{query} {gate['note'] if solvable else gate['decoy_note']}"
    elif kind == "conflict":
        query = f"{query} {gate['sentence'] if solvable else gate['unsolvable_sentence']}"
        tools = renamed_base(base, gate["renamed"])["tools"]
    else:
        query = f"{query} {gate['sentence']}"
        removed = [t["name"] for t in tools if gate["cap"] in t["hidden"]["capabilities"]]
        listed = []
        for t in tools:
            if t["name"] in removed:
                listed += [retired_lookalike(t), t] if solvable else [retired_lookalike(t)]
            else:
                listed.append(t)
        tools = listed
        if solvable:
            removed = []
    return {"query": query, "files": files, "tools": tools, "removed_tools": removed}


def other_files(gen_seed: int, base: dict[str, Any], eligible: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An Unsolvable visual case's attachments: another case's files of the same kind and number, so
    the files the query names are not there (their names differ) while something is attached.

    The paper's visual case attaches nothing (Fig. 17: `files = []`), and then the number of files
    alone tells it from every solvable case (the probe read 1.000); `unsolvable_visual: no_file`
    keeps that layout for the paper's exact setup."""
    if not eligible:
        return []  # no bases to borrow from: the paper's layout
    rng = case_rng(gen_seed, "unsolvable_files", base["index"])
    names = {f["name"] for f in base["background"]["files"]}
    donors = [b for b in eligible if b["index"] != base["index"] and _file_kind(b) == _file_kind(base)
              and len(b["background"]["files"]) == len(base["background"]["files"])
              and not names & {f["name"] for f in b["background"]["files"]}]
    if not donors:
        raise RuntimeError(f"no base lends files to the visual case of {base['base_id']}")
    return [dict(f) for f in rng.choice(donors)["background"]["files"]]


def unsolvable_variant(gen_seed: int, base: dict[str, Any], utype: str,
                       eligible: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """§4.5: the four unsolvable edits of one visual base.

    visual: other files are attached than the ones the query names (`other_files`; `eligible` are the
    bases that may lend them). conflict: the query requires, by name, a tool the list lacks (the step's
    tool is listed under its other name). tool: it requires a capability (named generically) whose every
    tool is removed, a retired look-alike listed in each one's place. info: it refers to a private note
    whose value it never gives."""
    if utype == "visual":
        return {"unsolvable_type": utype, "query": base["query"], "files": other_files(gen_seed, base, eligible or []),
                "tools": list(base["tools"]), "removed_tools": [],
                "blocking_terms": ["image", "frame", "screenshot", "video", "file", "visual"]}
    gate = unsolvable_gate(gen_seed, base, utype)
    note = {k: v for k, v in gate.items()
            if k in ("mandatory_tool", "step_tool", "capability", "strategy", "removed_value") or (k == "renamed" and v)}
    return {"unsolvable_type": utype, **gated_case(base, utype, gate, solvable=False),
            "blocking_terms": gate["terms"], **note}


def twin_case(gen_seed: int, base: dict[str, Any], kind: str) -> dict[str, Any]:
    """The solvable twin of an Unsolvable kind as a model sees it: its query, files and tools."""
    twin = twin_variant(gen_seed, base, kind)
    return {"query": twin["query"], "files": base["background"]["files"], "tools": twin["tools"]}


def twin_variant(gen_seed: int, base: dict[str, Any], kind: str) -> dict[str, Any]:
    """The solvable twin of one Unsolvable kind as a case of its own, shown under the same refusal
    prompt: its gate read exactly as that kind's Unsolvable case reads it, and the world that makes it
    solvable (visual: the base itself, its files attached)."""
    if kind == "visual":
        return {"gate": kind, "query": base["query"], "tools": list(base["tools"])}
    gate = unsolvable_gate(gen_seed, base, kind)
    case = gated_case(base, kind, gate, solvable=True)
    return {"gate": kind, "query": case["query"], "tools": case["tools"],
            **({"renamed": gate["renamed"]} if gate.get("renamed") else {})}


def control_variant(gen_seed: int, base: dict[str, Any]) -> dict[str, Any]:
    """The §7.5 control: the solvable twin of one kind drawn like the Unsolvable cases'."""
    return twin_variant(gen_seed, base, case_rng(gen_seed, "unsolvable_control", base["index"]).choice(UNSOLVABLE_TYPES))


def _windows(base: dict[str, Any]) -> list[list[str]]:
    """Runs of 2-3 consecutive reference steps that form a dependency chain (composite candidates)."""
    nodes = plans.node_map(base["reference"]["nodes"])
    order = base["reference"]["linearization"]
    L = len(order)
    windows = []
    for i in range(L - 1):
        if order[i] in nodes[order[i + 1]]["deps"]:
            windows.append([order[i], order[i + 1]])
            if i + 2 < L and order[i + 1] in nodes[order[i + 2]]["deps"]:
                windows.append([order[i], order[i + 1], order[i + 2]])
    return [w for w in windows if len(w) < L]


def efficiency_eligible(base: dict[str, Any]) -> bool:
    # a per-item constraint forbids the batching composites that make a plan cheaper
    if any(c["type"] == "per_item" for c in base["constraints"]):
        return False
    return len(_windows(base)) >= 3


def efficiency_variant(gen_seed: int, base: dict[str, Any]) -> dict[str, Any]:
    """§4.6: costs, 3-6 composites over consecutive dependent steps, 2-4 traps, the optimal cost."""
    rng = case_rng(gen_seed, "efficiency", base["index"])
    ref = base["reference"]
    nodes = plans.node_map(ref["nodes"])
    order = ref["linearization"]
    L = len(order)
    style = SOURCE_STYLE[base["source_style"]]
    api = DOMAIN_BY_NAME[base["domain"]].api
    cost = {t["name"]: (0 if t["name"] == FINISH else rng.randint(1, 5)) for t in base["tools"]}
    windows = _windows(base)
    if len(windows) < 3:
        raise ValueError(f"{base['base_id']} has fewer than 3 composite windows")
    ncomp = rng.randint(3, min(6, len(windows)))
    chosen = rng.sample(windows, ncomp)
    names = {t["name"].lower() for t in base["tools"]}
    new_tools = []
    for w in chosen:
        verbs = [nodes[n]["tool"] for n in w]
        words = ["run"] + [split_words(v.replace("_for_" + api, ""))[0] for v in verbs] + \
            split_words(nodes[w[-1]]["tool"].replace("_for_" + api, ""))[1:3] + ["pipeline"]
        name = style_name(words, style, api)
        k = 2
        while name.lower() in names:
            name = style_name(words + [str(k)], style, api)
            k += 1
        names.add(name.lower())
        params, pmap = [], {}
        for n in w:
            for p, spec in nodes[n]["args"].items():
                if any(s in w for s in plans.spec_sources(spec)):
                    continue
                q = p if p not in pmap else f"{p}_{w.index(n) + 1}"
                pmap[q] = [n, p]
                params.append(param_entry(q, "string", True, f"input '{p}' of the {nodes[n]['tool']} step"))
        c = max(1, sum(cost[nodes[n]["tool"]] for n in w) - rng.randint(1, 2))
        tool = make_tool(name, "Does " + " then ".join(nodes[n]["tool"] for n in w) + " in one call.", params,
                         "the output of the last combined step.", caps=["composite"], kind="composite", words=words,
                         extra_hidden={"covers": list(w), "param_map": pmap})
        tool["hidden"]["cost"] = c
        new_tools.append(tool)
    traps = []
    ntrap = rng.randint(2, 4)
    trap_nodes = rng.sample(order, min(L, ntrap))
    for i, nid in enumerate(trap_nodes):
        n = nodes[nid]
        base_tool = next(t for t in base["tools"] if t["name"] == n["tool"])
        kind = ("overpriced", "off_target", "redundant")[i % 3]
        params = [param_entry(p, "string", True, "same as the original")
                  for p in base_tool["parameters"]["properties"]]
        if kind == "redundant":
            # the node's work split over two calls whose costs add up to more than the original
            wa, wb = ["prepare"] + base_tool["hidden"]["words"], ["finalize"] + base_tool["hidden"]["words"]
            na, nb = style_name(wa, style, api), style_name(wb, style, api)
            if na.lower() in names or nb.lower() in names or len(new_tools) + len(traps) + 2 > 10:
                continue
            names.update({na.lower(), nb.lower()})
            base_cost = cost[base_tool["name"]]
            ca = max(1, base_cost // 2 + 1)
            part_a = make_tool(na, f"Does the first half of what {base_tool['name']} does (staging the request).",
                               params, "a staging ticket.", caps=[f"trap:{n['cap']}:stage"], kind="trap", words=wa,
                               extra_hidden={"covers": None, "trap": "redundant_part", "trap_id": i})
            part_a["hidden"]["cost"] = ca
            part_b = make_tool(nb, f"Does the second half of what {base_tool['name']} does; needs {na} first.",
                               params, "the same output as the original.", caps=list(base_tool["hidden"]["capabilities"]),
                               kind="trap", words=wb,
                               extra_hidden={"covers": [n["id"]], "trap": "redundant", "requires": na, "trap_id": i,
                                             "param_map": {p: [n["id"], p] for p in n["args"]}})
            part_b["hidden"]["cost"] = max(1, base_cost - ca + 1 + rng.randint(0, 1))
            traps += [part_a, part_b]
            continue
        words = (["premium"] if kind == "overpriced" else ["quick"]) + base_tool["hidden"]["words"] + \
            ([] if kind == "overpriced" else ["preview"])
        name = style_name(words, style, api)
        if name.lower() in names or len(new_tools) + len(traps) + 1 > 10:
            continue
        names.add(name.lower())
        if kind == "overpriced":
            tool = make_tool(name, f"Does the same as {base_tool['name']} with priority support.", params,
                             "the same output.", caps=list(base_tool["hidden"]["capabilities"]), kind="trap",
                             words=words, extra_hidden={"covers": [n["id"]], "trap": "overpriced", "trap_id": i,
                                                        "param_map": {p: [n["id"], p] for p in n["args"]}})
            tool["hidden"]["cost"] = cost[base_tool["name"]] + rng.randint(3, 5)
        else:
            tool = make_tool(name, f"Does a partial preview of what {base_tool['name']} returns (first lines only).",
                             params, "a truncated preview.", caps=[f"trap:{n['cap']}"], kind="trap", words=words,
                             extra_hidden={"covers": None, "trap": "off_target", "near": n["id"], "trap_id": i})
            tool["hidden"]["cost"] = 1
        traps.append(tool)
    if len({t["hidden"]["trap_id"] for t in traps}) < 2:
        raise ValueError(f"{base['base_id']}: fewer than 2 traps")
    node_cost = {nid: cost[nodes[nid]["tool"]] for nid in order}
    comps = [{"name": t["name"], "covers": t["hidden"]["covers"], "cost": t["hidden"]["cost"]} for t in new_tools]
    optimal, calls = plans.min_cost_cover(order, node_cost, comps)
    reference_cost = sum(node_cost.values())
    if optimal >= reference_cost:
        raise ValueError(f"{base['base_id']}: composites do not lower the cost")
    return {"costs": cost, "composites": new_tools, "traps": traps, "optimal_cost": optimal,
            "reference_cost": reference_cost, "optimal_calls": calls}


# ----------------------------------------------------------------------------- the dataset

@dataclass
class Dataset:
    """All cases of one generation seed: the base pool and the per-setting task lists."""

    gen_seed: int
    bases: list[dict[str, Any]]
    tasks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    twins: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per Unsolvable setting, each of its cases' solvable twin (`twin_variant`), and for Tool-Broken each
    case's twin whose call succeeds (`broken_twin`): a setting holds them beside its cases unless the
    paper's layout is asked for (APB option `twins`)."""
    paper: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The paper's cases of each setting whose default cases are laid out otherwise (Tool-Broken: the
    replacement alone beside the broken tool, `broken_variant`, where the default lists look-alikes,
    `lookalike_variant`), and in `paper_twins` their twins: what APB option `lookalikes: false` serves."""
    paper_twins: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: float = 0.0

    def cell(self, setting: str, twins: bool = True, lookalikes: bool = True) -> list[dict[str, Any]]:
        """The cases a setting holds: its tasks, and with `twins` its cases' twins (the field above), each
        after its case (so the first n of a setting, as `tasks: {limit: n}` takes them, are pairs)."""
        paper = not lookalikes and setting in self.paper
        cases = self.paper[setting] if paper else self.tasks[setting]
        pairs = (self.paper_twins if paper else self.twins).get(setting) if twins else None
        return [t for pair in zip(cases, pairs) for t in pair] if pairs else cases

    def task_index(self, setting: str, twins: bool = True, lookalikes: bool = True) -> dict[str, dict[str, Any]]:
        cache = self.__dict__.setdefault("_index", {})
        key = (setting, twins, lookalikes)
        if key not in cache:
            cache[key] = {t["task_id"]: t for t in self.cell(setting, twins, lookalikes)}
        return cache[key]


EXTRANEOUS_LEVELS = (2, 4, 6, 8, 10)
UNSOLVABLE_TYPES = ("conflict", "info", "tool", "visual")
REFINE_MODES = ("self_plus", "self_minus", "critic_plus", "critic_minus")


def generate(gen_seed: int = 0) -> Dataset:
    """Generate every case of every setting for one seed (pure, deterministic, no network)."""
    import time

    t0 = time.perf_counter()
    bases = [build_base(gen_seed, s) for s in slots(gen_seed)]
    ds = Dataset(gen_seed, bases)
    tid = lambda setting, i: f"apb-g{gen_seed}-{setting}-{i:05d}"  # noqa: E731
    ds.tasks["holistic"] = [{"task_id": tid("holistic", b["index"]), "base": b["index"], "kind": "holistic"} for b in bases]
    # step-wise: 300 bases, middle cut, k = 1, 2, 3; stages early/late with k = 1
    sw = stratified_draw(gen_seed, "stepwise", bases, 300)
    for k in (1, 2, 3):
        ds.tasks[f"stepwise_k{k}"] = [{"task_id": tid(f"stepwise_k{k}", i), "base": i, "kind": "stepwise", "k": k,
                                       "j": cut_points(bases[i]["meta"]["L"])["middle"], "stage": "middle"} for i in sw]
    for stage in ("early", "late"):
        ds.tasks[f"stepwise_stage_{stage}"] = [
            {"task_id": tid(f"stepwise_stage_{stage}", i), "base": i, "kind": "stepwise", "k": 1,
             "j": cut_points(bases[i]["meta"]["L"])[stage], "stage": stage} for i in sw]
    # extraneous: 150 holistic + 150 step-wise bases, 10 nested distractors each
    ext_h = stratified_draw(gen_seed, "extraneous_holistic", bases, 150)
    ext_s = stratified_draw(gen_seed, "extraneous_stepwise", bases, 150)
    sample = sorted(set(ext_h) | set(ext_s))
    pool = balanced_pool(gen_seed, bases, sample)
    distractors = {i: distractors_for(gen_seed, bases[i], pool) for i in sample}
    for n_e in (0, *EXTRANEOUS_LEVELS):
        ds.tasks[f"extraneous_holistic_n{n_e}"] = [
            {"task_id": tid(f"extraneous_holistic_n{n_e}", i), "base": i, "kind": "holistic", "n_e": n_e,
             "distractors": distractors[i][:n_e]} for i in ext_h]
        ds.tasks[f"extraneous_stepwise_n{n_e}"] = [
            {"task_id": tid(f"extraneous_stepwise_n{n_e}", i), "base": i, "kind": "stepwise", "k": 1, "n_e": n_e,
             "j": cut_points(bases[i]["meta"]["L"])["middle"], "stage": "middle",
             "distractors": distractors[i][:n_e]} for i in ext_s]
    # broken: the 300 step-wise bases, with look-alikes of the broken tool and in the paper's layout
    ds.tasks["broken"] = [{"task_id": tid("broken", i), "base": i, "kind": "broken", **v}
                          for i, v in zip(sw, lookalike_cases(gen_seed, bases, sw))]
    ds.paper["broken"] = [{"task_id": tid("broken", i), "base": i, "kind": "broken",
                           **broken_variant(gen_seed, bases[i])} for i in sw]
    for cases, twins in ((ds.tasks, ds.twins), (ds.paper, ds.paper_twins)):
        twins["broken"] = [{"task_id": tid("broken-twin", t["base"]), "base": t["base"],
                            **broken_twin(bases[t["base"]], t)} for t in cases["broken"]]
    # unsolvable: the same 100 visual bases x 4 types, each case with its solvable twin under the same
    # prompt; plus 100 controls (one twin each, its kind drawn) for §7.5's calibration
    uns = stratified_draw(gen_seed, "unsolvable", bases, 100, eligible=unsolvable_eligible)
    eligible = [b for b in bases if unsolvable_eligible(b)]
    for ut in UNSOLVABLE_TYPES:
        ds.tasks[f"unsolvable_{ut}"] = [{"task_id": tid(f"unsolvable_{ut}", i), "base": i, "kind": "unsolvable",
                                         **unsolvable_variant(gen_seed, bases[i], ut, eligible)} for i in uns]
        ds.twins[f"unsolvable_{ut}"] = [{"task_id": tid(f"unsolvable_{ut}-twin", i), "base": i, "kind": "control",
                                         "twin_of": ut, **twin_variant(gen_seed, bases[i], ut)} for i in uns]
    ds.tasks["unsolvable_control"] = [{"task_id": tid("unsolvable_control", i), "base": i, "kind": "control",
                                       **control_variant(gen_seed, bases[i])} for i in uns]
    # efficiency: 106 bases with a cost-saving tool bank
    eff = stratified_draw(gen_seed, "efficiency", bases, 106, eligible=efficiency_eligible)
    eff_pool = {i: efficiency_variant(gen_seed, bases[i]) for i in eff}
    ds.tasks["efficiency"] = [{"task_id": tid("efficiency", i), "base": i, "kind": "efficiency", **eff_pool[i]} for i in eff]
    # refinement: 150 holistic + 150 step-wise (k = 1) bases, independent of the extraneous draws
    ref_h = stratified_draw(gen_seed, "refine_holistic", bases, 150)
    ref_s = stratified_draw(gen_seed, "refine_stepwise", bases, 150)
    for mode in REFINE_MODES:
        s = f"refine_{mode}"
        ds.tasks[s] = [{"task_id": tid(s, i) + "-hol", "base": i, "kind": "refine", "half": "holistic", "mode": mode}
                       for i in ref_h] + \
                      [{"task_id": tid(s, i) + "-sw", "base": i, "kind": "refine", "half": "stepwise", "mode": mode,
                        "k": 1, "j": cut_points(bases[i]["meta"]["L"])["middle"], "stage": "middle"} for i in ref_s]
    ds.seconds = time.perf_counter() - t0
    return ds


_CACHE: dict[int, Dataset] = {}
_LOCK = threading.Lock()


def dataset(gen_seed: int = 0) -> Dataset:
    """The process-wide cached dataset of a seed (built once, read concurrently)."""
    with _LOCK:
        if gen_seed not in _CACHE:
            _CACHE[gen_seed] = generate(gen_seed)
        return _CACHE[gen_seed]


def check_private_info(tools: list[dict[str, Any]]) -> bool:
    return not any(set(t["hidden"]["capabilities"]) & PRIVATE_INFO_CAPS for t in tools)
