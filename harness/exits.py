"""The exit statuses of the harness's commands, named once: schedulers, CI jobs and scripts branch on
them, so each number keeps one meaning across every verb, and the code says which it means.

The cell processes (``workloads/``) keep their own statuses: they run inside the environments under
test, on Pythons this package does not run on, and import nothing of the host side.
"""

OK = 0  # done, and the answer is yes: every cell has its result, nothing new changed, nothing breaks
CHANGED = 1  # done, and the answer is no: cells left without a result, new changes, a break or a difference
USER_ERROR = 2  # input or a setup to fix, said in one line (a watch: also its own failure, never read as 1)
BUSY = 3  # nothing done: another watch holds this matrix or results folder (--wait waits for it instead)
INTERRUPTED = 130  # Ctrl-C or SIGTERM: every finished cell is kept; the same command again resumes
