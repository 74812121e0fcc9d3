"""pytest plugin of the byte-identity harness (``tools/output_hashes.py``); load with ``-p tests.hash_plugin``.

Records the sha256 of every ``.tosa`` and ``.mlir`` the test session produces, in this process, in
xdist workers (which load the plugin too) and in subprocesses (``tools/hash_hook`` on ``PYTHONPATH``).
Needs ``TF2TOSA_HASH_DIR``; without it the plugin does nothing.
"""

from __future__ import annotations

import os
import sys

_HOOK_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "hash_hook")

if os.environ.get("TF2TOSA_HASH_DIR"):
    if _HOOK_DIR not in sys.path:
        sys.path.insert(0, _HOOK_DIR)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _HOOK_DIR not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([_HOOK_DIR, *parts])
    from output_hashes_hook import install

    install()
