"""``python -m harness.executors.slurm task SUBMISSION_DIR OFFSET``: what an array task runs."""

import sys

from .task import main

sys.exit(main())
