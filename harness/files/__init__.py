"""The folders the harness writes: where they may be, the harness's own files under them, the
folders a command writes (never a results folder, never the user's code), and the one Atom writer."""
