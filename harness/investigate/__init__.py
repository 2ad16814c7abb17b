"""Questions about a change, answered by running cells: bisect (the release), diverge (the
layer), reduce (the smallest script), repro (one cell again, with a bundle), and one watch of a matrix."""
