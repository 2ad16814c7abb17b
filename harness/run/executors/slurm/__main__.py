"""``python -m harness.run.executors.slurm task SUBMISSION_DIR OFFSET``: what an array task runs."""

import sys

from harness.run.executors.slurm.task import main

sys.exit(main())
