"""Running a matrix: what runs where (the runner), a cell's life below every executor (lifecycle),
the executors that place cells (this host, a Slurm cluster), and `build` (environments, no cell)."""
