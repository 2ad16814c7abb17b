"""The command line's shared options, each declared once: argument types, the engine options every
building command takes, the Slurm options (a matrix's `slurm:` reads the same declarations)."""
