"""Write docs/api-options.md, the list of conversion options, from the fields of
:class:`tf2tosa.options.ConvertOptions` (each field's ``doc`` and ``cli`` metadata).

    PYTHONPATH=$PWD .venv/bin/python tools/options_doc.py           # (re)write the page
    PYTHONPATH=$PWD .venv/bin/python tools/options_doc.py --check   # exit 1 when the page is out of date

tests/test_options.py fails when the page differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api-options.md"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from tf2tosa.options import documentation

    text = documentation()
    if "--check" in argv:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run tools/options_doc.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
