"""``python -m workloads SPEC.json OUTDIR``: run one cell and record it."""
import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
