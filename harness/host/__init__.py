"""What this machine offers and does: its GPU and CPU sets, NVML sampling, which process is which,
the watch over a running cell, and what of the harness's own ran beside one."""
