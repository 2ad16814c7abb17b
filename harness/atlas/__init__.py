"""The compatibility atlas: the seeds' workloads measured on every TensorFlow and Keras release.

``drive`` runs the atlas matrices an environment at a time within a disk bound; ``records``
turns results into the compact, versioned data the repository keeps; ``rows`` and ``changes``
read that data as a table and as what moved between neighbouring releases; ``publish`` writes
the pages, the data files and the feed; ``lookup`` answers for a project's pins.
"""
