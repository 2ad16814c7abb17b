"""Host side of the TF/Keras multi-GPU reproducibility harness.

Runs on the user's machine (Python >= 3.10). It never imports TensorFlow or
Keras: those live only inside the environments under test, reached through a
process boundary (see ``harness.workloads``, which runs on the other side).
"""

from pathlib import Path

__version__ = "0.1.0"
SCHEMA = 1  # result.json schema version

# The package's own folder, named once: its `workloads` (what a cell process runs) is found from it
SOURCE = Path(__file__).resolve().parent
WORKLOADS = SOURCE / "workloads"
