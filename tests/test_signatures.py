"""Signatures name the root cause: table-driven checks of the pure functions in
harness/status/outcome.py. The same rules are exercised on real failing environments in
tests/test_held_out.py; these pin the corner cases fast."""

from __future__ import annotations

import pytest

from harness.host.supervise import RawOutcome
from harness.status import outcome

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

KERAS_REraise = """\
Traceback (most recent call last):
  File "/v/lib/python3.11/site-packages/tensorflow/python/util/lazy_loader.py", line 58, in _load
    module = importlib.import_module(self.__name__)
  File "/v/lib/python3.11/site-packages/keras/utils/generic_utils.py", line 17, in <module>
    from collections import Iterable
ImportError: cannot import name 'Iterable' from 'collections' (/usr/lib/python3.11/collections/__init__.py)

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/v/workloads/run.py", line 70, in _train
    stack = compat.load(spec)
ImportError: Keras cannot be imported. Check that it is installed.
"""

TF1_NATIVE = """\
Traceback (most recent call last):
  File "/v/lib/python3.6/site-packages/tensorflow/python/pywrap_tensorflow.py", line 58, in <module>
    from tensorflow.python.pywrap_tensorflow_internal import *
ImportError: libcublas.so.9.0: cannot open shared object file: No such file or directory

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/v/workloads/compat.py", line 93, in _import_tf
    import tensorflow as tf
ImportError: Traceback (most recent call last):
  File "/v/lib/python3.6/site-packages/tensorflow/python/pywrap_tensorflow.py", line 58, in <module>
    from tensorflow.python.pywrap_tensorflow_internal import *
ImportError: libcublas.so.9.0: cannot open shared object file: No such file or directory


Failed to load the native TensorFlow runtime.

See https://www.tensorflow.org/install/errors
"""

HANDLED_KEYERROR = """\
Traceback (most recent call last):
  File "x.py", line 3, in get
    return cache[key]
KeyError: 'model'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "x.py", line 5, in get
    raise ValueError("no model named 'model' in 3 layers")
ValueError: no model named 'model' in 3 layers
"""

EXPLICIT_CAUSE = """\
Traceback (most recent call last):
  File "x.py", line 3, in f
    g()
AttributeError: module 'tensorflow.compat.v2.__internal__' has no attribute 'register_load_context_function'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "x.py", line 5, in <module>
    raise RuntimeError("loading the legacy Keras failed")
RuntimeError: loading the legacy Keras failed
"""


def raw(code=1):
    return RawOutcome(exit_code=code, signal=None, timed_out=None, seconds=1.0)


@pytest.mark.parametrize("text, root_type, root_start, outer_start", [
    (KERAS_REraise, "ImportError", "cannot import name 'Iterable'", "Keras cannot be imported"),
    (TF1_NATIVE, "ImportError", "libcublas.so.9.0: cannot open", "Traceback (most recent call last)"),
    (HANDLED_KEYERROR, "ValueError", "no model named", "no model named"),
    (EXPLICIT_CAUSE, "AttributeError", "module 'tensorflow.compat.v2.__internal__'", "loading the legacy"),
])
def test_the_root_of_a_printed_chain(text, root_type, root_start, outer_start):
    chain = outcome.expand(outcome.parse_traceback(text))
    root = chain[outcome.root_index(chain)]
    assert root["type"] == root_type
    assert root["message"].startswith(root_start)
    assert chain[0]["message"].startswith(outer_start)


@pytest.mark.parametrize("stderr, signature", [
    (KERAS_REraise, "import: ImportError: cannot import name 'Iterable' from 'collections' (<path>)"),
    (TF1_NATIVE, "import: ImportError: libcublas.so.9.0: cannot open shared object file: No such file or directory"),
    (HANDLED_KEYERROR, "exception: ValueError: no model named 'model' in <n> layers"),
    (EXPLICIT_CAUSE, "exception: AttributeError: module 'tensorflow.compat.v2.__internal__' has no attribute "
                     "'register_load_context_function'"),
])
def test_stderr_alone_gives_the_root_cause(stderr, signature):
    verdict = outcome.classify(raw(), None, None, stderr)
    assert verdict.status == "error"
    assert verdict.error["signature"] == signature
    assert "Traceback" not in verdict.error["signature"]


def test_the_workload_chain_gives_the_root_and_keeps_the_outer_message():
    workload = {"outcome": "error", "error": {
        "type": "builtins.ImportError", "message": "Keras cannot be imported. Check that it is installed.",
        "traceback": KERAS_REraise,
        "chain": [{"type": "builtins.ImportError", "message": "Keras cannot be imported. Check that it is installed.",
                   "link": "context"},
                  {"type": "builtins.ImportError",
                   "message": "cannot import name 'Iterable' from 'collections' (/usr/lib/python3.11/c.py)",
                   "link": None}]}}
    verdict = outcome.classify(raw(), workload, None, "")
    err = verdict.error
    assert err["signature"] == "import: ImportError: cannot import name 'Iterable' from 'collections' (<path>)"
    assert err["outer"]["message"] == "Keras cannot be imported. Check that it is installed."
    assert err["outer"]["signature"].startswith("import: ImportError: Keras cannot be imported")
    assert [c["link"] for c in err["chain"]] == ["context", None]


def test_a_message_that_embeds_a_traceback_never_signs_as_traceback():
    message = TF1_NATIVE.split("ImportError: ", 2)[2]  # the outer message only, as str(exc) gives it
    workload = {"outcome": "error", "error": {"type": "builtins.ImportError", "message": message}}
    err = outcome.classify(raw(), workload, None, "").error
    assert err["signature"] == \
        "import: ImportError: libcublas.so.9.0: cannot open shared object file: No such file or directory"


@pytest.mark.parametrize("a, b", [
    # TF 1: the loss and the accuracy metric report the same cut with shapes of two ranks
    ("Incompatible shapes: [126,4] vs. [128,4]", "Incompatible shapes: [126] vs. [128]"),
    ("Incompatible shapes: [63,4] vs. [127,4]\n\t [[{{node loss/sub}}]]", "Incompatible shapes: [?,4] vs. [42]"),
    ("Shapes (128, 4) and (126, 4) are incompatible", "Shapes (None, 4) and (127,) are incompatible"),
    ("Tried to read from index 12 at 0x7f3a", "Tried to read from index 3 at 0x55aa"),
])
def test_one_family_is_never_split(a, b):
    assert outcome.normalise(a) == outcome.normalise(b)


@pytest.mark.parametrize("message, normalised", [
    ("libcublas.so.9.0: cannot open shared object file", "libcublas.so.9.0: cannot open shared object file"),
    ("/usr/lib/x86_64-linux-gnu/libcudnn.so.7: cannot open", "libcudnn.so.7: cannot open"),
    ("Incompatible shapes: [126,4] vs. [128,4]", "Incompatible shapes: <shape> vs. <shape>"),
    ("got 3 arguments (expected 2)", "got <n> arguments (expected <n>)"),
])
def test_normalise(message, normalised):
    assert outcome.normalise(message) == normalised


def test_native_library_signature_names_the_library_even_with_a_path():
    sig = outcome.signature("import", "ImportError",
                            "/opt/x/libcudnn.so.7: cannot open shared object file: No such file or directory")
    assert sig == "import: ImportError: libcudnn.so.7: cannot open shared object file: No such file or directory"


def test_long_signatures_are_kept_whole_and_cut_short_at_a_word():
    words = " ".join(f"word{chr(97 + i % 26)}" for i in range(60))
    err = outcome.classify(raw(), {"outcome": "error", "error": {"type": "ValueError", "message": words}},
                           None, "").error
    assert err["signature"].endswith(outcome.normalise(words))
    short = err["signature_short"]
    assert len(short) <= outcome.SHORT_CHARS and short.endswith("\u2026")
    assert err["signature"].startswith(short[:-1]) and short[-2] != " "
    assert short[:-1].split(" ")[-1] in err["signature"].split(" ")  # cut between words, not inside one


def test_keras_mismatch_has_its_own_kind():
    workload = {"outcome": "error", "error": {"type": "workloads.compat.KerasMismatch",
                                             "message": "asked standalone keras 2.2.4, ran tf.keras 2.15.0"}}
    err = outcome.classify(raw(), workload, None, "").error
    assert err["signature"] == "keras mismatch: asked standalone keras <n>, ran tf.keras <n>"


def test_numbers_inside_names_stay():
    assert outcome.normalise("no attribute 'float32' in v2 for dense_3") == "no attribute 'float32' in v2 for dense_<n>"


GRAPH_EXECUTION = """Graph execution error:

Detected at node gradient_tape/categorical_crossentropy/mul/BroadcastGradientArgs defined at (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main

  File "/v/keras/src/optimizers/optimizer.py", line 276, in compute_gradients

Incompatible shapes: [127,4] vs. [126,4]
\t [[{{node gradient_tape/categorical_crossentropy/mul/BroadcastGradientArgs}}]] [Op:__inference_train_function_11046]
"""


def test_a_tf2_runtime_op_failure_signs_with_the_ops_message():
    workload = {"outcome": "error", "error": {"type": "tensorflow.python.framework.errors_impl.InvalidArgumentError",
                                             "message": GRAPH_EXECUTION}}
    err = outcome.classify(raw(), workload, None, "").error
    assert err["signature"] == "exception: InvalidArgumentError: Incompatible shapes: <shape> vs. <shape>"


def test_a_graph_execution_error_with_several_root_errors_signs_with_the_op_message():
    """TF 2 on two devices: "2 root error(s) found" and a closing tally; the op's message is the cause."""
    from harness.status.outcome import signature
    message = ("Graph execution error:\n\nDetected at node x defined at (most recent call last):\n"
               "  File \"a.py\", line 1, in f\n\n2 root error(s) found.\n"
               "  (0) INVALID_ARGUMENT:  Incompatible shapes: [127,4] vs. [126,4]\n\t [[{{node x}}]]\n"
               "  (1) INVALID_ARGUMENT:  Incompatible shapes: [127,4] vs. [126,4]\n\t [[{{node x}}]]\n"
               "0 successful operations.\n0 derived errors ignored. [Op:__inference_train_function_11046]")
    assert signature("exception", "InvalidArgumentError", message) == \
        "exception: InvalidArgumentError: Incompatible shapes: <shape> vs. <shape>"
