"""Shared fixtures: the on-disk model cache and model builders (TensorFlow-dependent, skipped without it)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # make ``import modelgen`` work from any rootdir

import modelgen  # noqa: E402


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


HAVE_TF = _have("tensorflow")
HAVE_LITERT = _have("ai_edge_litert")

requires_tf = pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not installed")
requires_litert = pytest.mark.skipif(not HAVE_LITERT, reason="ai_edge_litert is not installed")


@pytest.fixture(scope="session")
def model_cache_dir() -> Path:
    """Where built ``.tflite`` models are cached (``<repo>/.cache/models``)."""
    modelgen.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    return modelgen.CACHE_DIR


@pytest.fixture(scope="session")
def tflite_model() -> Callable[..., bytes]:
    """``tflite_model(name, quant=None) -> bytes`` for any ``ONE_OP_MODELS`` / ``NETWORKS`` name.

    A cached model is returned even without TensorFlow; building one needs TensorFlow (else the test skips).
    """

    def get(name: str, quant: str | None = None) -> bytes:
        try:
            return modelgen.get_model(name, quant=quant)
        except ModuleNotFoundError as e:
            if e.name is not None and e.name.split(".")[0] in ("tensorflow", "keras"):
                pytest.skip("tensorflow is not installed")
            raise

    return get


@pytest.fixture(scope="session")
def one_op_models(tflite_model: Callable[..., bytes]) -> dict[str, bytes]:
    """Every float ``ONE_OP_MODELS`` entry, built (or loaded from the cache) once per session."""
    return {name: tflite_model(name) for name in modelgen.ONE_OP_MODELS}


@pytest.fixture(scope="session")
def litert_worker() -> Iterator[Any]:
    """A persistent :class:`tf2tosa.verify.litert.LiteRTWorker` (skips if ai_edge_litert is missing)."""
    if not HAVE_LITERT:
        pytest.skip("ai_edge_litert is not installed")
    from tf2tosa.verify.litert import LiteRTWorker

    with LiteRTWorker() as worker:
        yield worker
