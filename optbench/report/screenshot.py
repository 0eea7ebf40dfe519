"""A PNG of a local HTML page, taken by headless Chromium's own ``--screenshot`` (no driver, no package).

Chromium captures its window, so the window is made ``MAX_HEIGHT`` px tall and the uniform background
below the page's content is then cut off (Pillow, which matplotlib already needs): the PNG fits the page,
and a page taller than ``MAX_HEIGHT`` is clipped. The browser is ``$OPTBENCH_CHROMIUM``, else the first
of ``NAMES`` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WIDTH, MAX_HEIGHT, MARGIN = 1280, 12000, 24
TIMEOUT_S = 60


class ScreenshotError(RuntimeError):
    """Chromium could not be run or wrote no PNG."""


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary, or None."""
    explicit = os.environ.get("OPTBENCH_CHROMIUM")
    if explicit:
        return shutil.which(explicit)
    return next((path for name in NAMES if (path := shutil.which(name))), None)


def _trim(png: Path) -> None:
    """Cut the background rows below the content, keeping ``MARGIN`` px of them."""
    from PIL import Image, ImageChops

    with Image.open(png) as image:
        rgb = image.convert("RGB")
    background = Image.new("RGB", rgb.size, rgb.getpixel((0, rgb.height - 1)))
    box = ImageChops.difference(rgb, background).getbbox()
    if box and box[3] + MARGIN < rgb.height:
        rgb.crop((0, 0, rgb.width, box[3] + MARGIN)).save(png)


def screenshot(html_path, png_path, width: int = WIDTH) -> Path:
    """Write a PNG of ``html_path`` (``width`` px wide, as tall as its content) to ``png_path``."""
    exe = find_chromium()
    if exe is None:
        raise ScreenshotError(f"no Chromium found (looked for $OPTBENCH_CHROMIUM, {', '.join(NAMES)})")
    png = Path(png_path).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="optbench-chromium-") as profile:
        args = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--no-first-run",
                f"--user-data-dir={profile}", f"--window-size={width},{MAX_HEIGHT}", f"--screenshot={png}",
                Path(html_path).resolve().as_uri()]
        try:
            done = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ScreenshotError(f"Chromium did not finish the screenshot within {TIMEOUT_S} s") from None
        except OSError as exc:
            raise ScreenshotError(f"cannot run {exe}: {exc}") from None
    if not png.is_file() or png.stat().st_size == 0:
        last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["no output"]
        raise ScreenshotError(f"Chromium wrote no screenshot (exit {done.returncode}): {last[0][:300]}")
    _trim(png)
    return png
