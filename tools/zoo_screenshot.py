"""Save a PNG screenshot of the model-zoo HTML report (or any tf2tosa report page) with headless Chromium.

Usage::

    python tools/zoo_screenshot.py                      # out/zoo/zoo.html -> out/zoo/zoo.png
    python tools/zoo_screenshot.py out/zoo -o zoo.png --width 1400 --height 2000
    python tools/zoo_screenshot.py out/zoo/zoo.json     # re-render zoo.html from the JSON first

Needs Debian's ``chromium`` (``apt-get install -y chromium``) or another Chrome on PATH (``$TF2TOSA_CHROMIUM``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tf2tosa.verify.report import chromium_path, load_zoo_json, screenshot, write_zoo_reports  # noqa: E402


def resolve(target: Path) -> Path:
    """The HTML page for ``target``: a page, a report folder, or a ``zoo.json`` (re-rendered first)."""
    if target.is_dir():
        target = target / "zoo.html"
    if target.suffix == ".json":
        results, meta = load_zoo_json(target)
        return write_zoo_reports(results, target.parent, meta)["html"]
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", nargs="?", default=str(REPO / "out" / "zoo" / "zoo.html"),
                    help="zoo.html, its folder, or zoo.json (default: out/zoo/zoo.html)")
    ap.add_argument("-o", "--output", help="the PNG to write (default: beside the page, .png)")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=2000)
    args = ap.parse_args(argv)
    if chromium_path() is None:
        print("error: no chromium on PATH; install it with: apt-get install -y chromium", file=sys.stderr)
        return 2
    page = resolve(Path(args.report))
    if not page.is_file():
        print(f"error: no report at {page} (run `tf2tosa zoo` first)", file=sys.stderr)
        return 2
    out = Path(args.output) if args.output else page.with_suffix(".png")
    png = screenshot(page, out, width=args.width, height=args.height)
    print(f"wrote {png} ({args.width}x{args.height})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
