"""Measure the streaming acceptance figures (issue 12) on the test suite's streaming models.

For each model (keyword spotter, LSTM+GRU cells, state types; float and int8) and each form (EXT-VARIABLE,
``--state-io``): 20 consecutive invocations on seeded random frames against LiteRT (BUILTIN_REF, one interpreter
invoked 20 times), the ``--state-io`` form through the Arm reference model with its own state fed back against our
executor, and tosa-opt validation of both forms with exactly the declared profiles and extensions.

    PYTHONPATH=$PWD .venv/bin/python tools/stream_figures.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STEPS = 20


def main() -> None:
    import tf2tosa
    from tests import modelgen_stream as ms
    from tf2tosa.verify import tosa_tools

    models = {"kws-f32": ms.kws_model(None), "kws-int8": ms.kws_model("int8"),
              "rnn-f32": ms.stateful_rnn_model(None), "rnn-int8": ms.stateful_rnn_model("int8"),
              "types": ms.state_types_model()}
    for name, data in models.items():
        m_var = tf2tosa.convert(data)
        m_io = tf2tosa.convert(data, state_io=True)
        for form, m in (("EXT-VARIABLE", m_var), ("state-io", m_io)):
            rep = m.verify_steps(STEPS, seed=1)
            ints = [o for o in rep.outputs if not o.is_float]
            floats = [o for o in rep.outputs if o.is_float]
            mism = sum(o.mismatches for o in ints)
            rel = max((o.max_abs / o.max_ref if o.max_ref else o.max_abs for o in floats), default=None)
            ok, msg = tosa_tools.validate(m.to_bytes(), m.profiles, m.extensions)
            print(f"{name:9s} {form:12s} steps pass {sum(s['ok'] for s in rep.steps or [])}/{STEPS}; "
                  f"int mismatches {mism} ({len(ints)} int outputs); float max|err|/max|ref| "
                  f"{'-' if rel is None else f'{rel:.3g}'}; tosa-opt {'ok' if ok else 'FAIL ' + msg[:80]} "
                  f"(profiles {m.profiles}, extensions {m.extensions})")
        # the state-io form through the Arm reference model, its own state fed back, against our session
        s = m_io.session()
        state = {v.input: v.initial for v in m_io.state_variables}
        blob = m_io.to_bytes()
        rng = np.random.default_rng(1)
        worst_int, worst_rel = 0, 0.0
        for _ in range(STEPS):
            feed = {}
            for v in m_io.graph.inputs:
                if v.name in s.input_names:
                    feed[v.name] = (rng.uniform(-1, 1, v.type.static_shape).astype(np.float32) if v.dtype.is_float
                                    else rng.integers(-128, 128, v.type.static_shape).astype(v.dtype.np_dtype()))
            ours = s.run(feed)
            out = tosa_tools.run_reference(blob, {**feed, **state})
            for v in m_io.state_variables:
                state[v.input] = out.pop(v.output)
            for k, a in ours.items():
                d = np.abs(out[k].astype(np.float64) - a.astype(np.float64))
                if a.dtype.kind == "f":
                    worst_rel = max(worst_rel, float(d.max() / max(np.abs(a).max(), 1e-30)))
                else:
                    worst_int += int(np.count_nonzero(d))
        print(f"{name:9s} Arm reference model, state-io, {STEPS} steps with its own state: int mismatches "
              f"{worst_int}; float max|err|/max|ours| {worst_rel:.3g}")


if __name__ == "__main__":
    main()
