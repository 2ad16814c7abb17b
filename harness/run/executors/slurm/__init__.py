"""Running a matrix on a Slurm cluster: one job-array task per cell.

The client is generated ``sbatch`` scripts plus ``squeue``/``sacct``, not
submitit. submitit pickles a Python callable per task and learns a job's state
only from sacct (without accounting it waits forever on a crashed job); here a
task's whole contract is a readable shell script and a line number, so a user
can read, rerun or cancel it with Slurm's own tools, a later shell (or another
person) can see what was submitted, and nothing but Slurm's CLI is needed.

Everything lives in the shared results folder, so the nodes, the submit side
and any later ``harness status`` read the same files:

    <results>/<run>/.slurm/<submission>/
        submission.json   what was asked: engine, --rerun, the arrays and their resources
        cells.txt         one cell id per line; task i of array k runs line offset_k + i
        <matrix file>     the matrix as submitted (tasks read this copy, not a file edited since)
        array-<k>.sh      the sbatch script of array k
        jobs.jsonl        {"array": k, "job": ID}, appended as each sbatch returns
        logs/ID_i.out     each task's output
        tasks/<line>.json what the task saw (node, job, CUDA_VISIBLE_DEVICES)

Inside its allocation a task runs its one cell through the lifecycle
(``lifecycle.Lifecycle``), so results are written exactly as a local run writes them. What Slurm decides
about a task that left no result is read back from the queue and accounting:
a time-limit kill becomes a ``timeout`` result and a memory kill an ``oom``
result; anything else (cancelled, node failure, preemption) says nothing
about the cell, so it is noted and the cell runs again on the next submission.

The parts, each in its own module (the options -- the matrix keys, the flags and their checks,
declared once -- are ``harness/options/slurm.py``, below the matrix loader that reads them too):

    submit.py       planning arrays, writing their scripts, sbatch
    submissions.py  reading what was submitted back from disk (checked: it is data, not trust)
    queue.py        asking squeue / sacct about every job at once, and the backing-off watcher
    board.py        where each cell stands (`harness status`)
    verdicts.py     a task Slurm killed at its time or memory limit becomes a result (via the lifecycle)
    task.py         inside an array task: run its one cell (``python -m harness.run.executors.slurm task``)
"""
