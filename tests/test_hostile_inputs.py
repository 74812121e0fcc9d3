"""Hostile inputs and careless commands (issue 29): nothing a user types destroys a file, nothing a model file holds
reaches outside it, and nothing converts that cannot run.

Every case runs the real command line in a child process (:mod:`tests.hostile`) and asserts the exit code, one
error line, no traceback, the folder unchanged (by hash), nothing read or written outside the model, and a peak RSS
under the cap its module states.  The cases live in one module per area, imported here so that this file is the one
list of them (pytest collects the imported tests and fixtures here; the area modules are not named ``test_*`` and
are not collected twice):

====  ==========================================================  ===========================================
item  what breaks                                                 tests
====  ==========================================================  ===========================================
1     output replaces a device, FIFO, symlink                     :mod:`tests.hostile_outputs` (devices, FIFOs,
                                                                  sockets, symlinks; --mlir, --output-dir,
                                                                  verify --report)
2     output equal to an input or to another output               :mod:`tests.hostile_outputs` (same path, hard
                                                                  link, symlink, a file of a model folder;
                                                                  specialize, run, verify, the API)
3     NNEF reads outside the model; archive bombs; deep nesting   :mod:`tests.hostile_nnef`
4     sizes the format cannot hold; inspect without the budget    :mod:`tests.hostile_sizes`
5     converts, then cannot run (softmax and other shifts);       :mod:`tests.hostile_sizes`
      convert --verify leaves files; LiteRT abort message
6     --io int on a dynamic-batch int8 export                     :mod:`tests.hostile_tf`
7     TensorFlow side effects (dropped, run by verify)            :mod:`tests.hostile_tf`
8     messages: Keras Lambda, corrupt .keras/.h5                  :mod:`tests.hostile_tf`
8     messages: symlinked/hard-linked .dat, two graph.nnef,       :mod:`tests.hostile_nnef`
      a .tgz that is not a tar
8     messages: output names of 241-255 characters, FIFO input    :mod:`tests.hostile_outputs`
9     docs and everyday output                                    :mod:`tests.hostile_docs`
====  ==========================================================  ===========================================

Fuzzing (deliverable 8) is ``tools/fuzz.py`` (``make fuzz``); its smoke test is in ``tests/test_fuzz.py``.
"""

from __future__ import annotations

from tests.hostile_docs import *  # noqa: F403
from tests.hostile_nnef import *  # noqa: F403
from tests.hostile_outputs import *  # noqa: F403
from tests.hostile_sizes import *  # noqa: F403
from tests.hostile_tf import *  # noqa: F403
