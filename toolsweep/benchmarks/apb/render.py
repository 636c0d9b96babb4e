"""Deterministic renders of a file's structured scene for vision models (§2.4 render mode): photos and
screenshots as 448x336 PNG, videos as 8 evenly spaced 224x168 frames, sent as OpenAI image parts."""

from __future__ import annotations

import base64
import io
from typing import Any

COLORS = {"red": (200, 40, 40), "blue": (40, 70, 200), "green": (40, 150, 60), "white": (235, 235, 235),
          "black": (20, 20, 20), "background": (150, 150, 150)}


def _image():  # noqa: ANN202
    try:
        from PIL import Image, ImageDraw
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError("APB file_mode='render' needs Pillow: pip install pillow") from exc
    return Image, ImageDraw


def _png(img: Any) -> dict[str, Any]:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return {"type": "image_url", "image_url": {"url": uri}}


def render_scene(scene: dict[str, Any], size: tuple[int, int] = (448, 336)) -> Any:
    Image, ImageDraw = _image()
    img = Image.new("RGB", size, (250, 248, 240))
    d = ImageDraw.Draw(img)
    sx, sy = size[0] / 448, size[1] / 336
    for o in scene.get("objects", []):
        x, y, w, h = o["bbox"]
        box = [x * sx, y * sy, (x + w) * sx, (y + h) * sy]
        d.rectangle(box, fill=COLORS.get(o["attributes"][0], (120, 120, 120)), outline=(0, 0, 0))
        d.text((box[0] + 2, box[1] + 2), o["class"], fill=(0, 0, 0))
    for r in scene.get("text_regions", []):
        x, y, w, h = r["bbox"]
        d.rectangle([x * sx, y * sy, (x + w) * sx, (y + h) * sy], fill=(255, 255, 255), outline=(0, 0, 0))
        d.text((x * sx + 4, y * sy + 8), r["text"], fill=(0, 0, 0))
    for wdg in scene.get("widgets", []):
        x, y, w, h = wdg["bbox"]
        x, y = x * 448 / 1300, y * 336 / 760
        d.rectangle([x, y, x + w / 3, y + h / 2], outline=(0, 0, 0), fill=(220, 225, 235))
        d.text((x + 2, y + 2), wdg["label"], fill=(0, 0, 0))
    return img


def render_file_parts(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Image parts for every file (8 frames per video), in manifest order."""
    parts: list[dict[str, Any]] = []
    for f in files:
        sc = f.get("scene", {})
        if f["type"] == "video":
            Image, ImageDraw = _image()
            for fr in sc.get("sampled_frames", []):
                img = Image.new("RGB", (224, 168), (235, 235, 245))
                d = ImageDraw.Draw(img)
                d.text((6, 6), f"frame {fr['frame']}", fill=(0, 0, 0))
                for i, ob in enumerate(fr["objects"]):
                    d.rectangle([30 + 40 * i, 60, 70 + 40 * i, 120], outline=(0, 0, 0), fill=(180, 200, 180))
                    d.text((32 + 40 * i, 62), ob, fill=(0, 0, 0))
                parts.append(_png(img))
        else:
            parts.append(_png(render_scene(sc)))
    return parts
