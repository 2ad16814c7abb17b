"""`harness upgrade`: how far a user's project can move up its packages' releases, with evidence.

Someone about to upgrade asks one question per package -- how new can I go before my training
breaks or changes? -- and a second about them all -- does the newest safe set hold together?
The answer is built from the harness's own pieces, never a parallel path: the user's pins
become one environment of a generated matrix and their script or model factory its workload
(`project`, `plan`) -- or a matrix cell's environment and workload, as that matrix defines them
(`fromcell`); each package is searched with bisect's search, oracle and cells
(`frontier`), so every release tested is an ordinary cell that `run`, `bisect` and a second
`upgrade` reuse; the evidence of a change comes from `reduce`, `diverge` and a bisect below the
releases (`evidence`); the report says nothing a cell does not back (`writers`).
"""

# Named here, below both the command line (its --accuracy-drop help) and the course that applies it
ACCURACY_FLOOR = 0.01  # the least accuracy change counted, however narrow the baseline's spread
