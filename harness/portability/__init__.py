"""Saved on one release, loaded on another: the model-file portability grid.

Keras says outright that a file saved by one release need not load on another; users find out
when they upgrade, and the worst case -- a file that loads and predicts differently -- in
production. The grid answers it per pair of stacks: every stack of a stacks file *writes* the
seeds' models (a GRU, an LSTM, a convnet and a model with a custom layer), trained a little and
saved in every format it writes; every stack then *reads* every writer's files by every way its
users would try, predicts on the writer's reference inputs, and the host judges each file:

- **same**: it loads, and predicts what the writer predicted within the floor that loading on the
  writer's own stack measured;
- **differs**: it loads and predicts otherwise (the worst case, said loudly, with its size);
- **refuses**: no way of loading worked (the error family of each);
- **unknown**: a format this reader cannot know at all (said with the reason, not tried).

It is built from the harness's own parts: each side is a cell of an ordinary matrix
(``grid.matrix`` writes it), the readers consume the writers' files through chains (``needs:``),
so it runs, resumes after a kill and goes to Slurm as any matrix does; the files are results,
never committed; ``publish`` keeps the compact records. The script both sides run is
``scripts/portable.py``: it observes, ``judge`` decides.
"""
