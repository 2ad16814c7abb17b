"""`harness watch`: follow the published releases of a matrix's packages, unattended.

Each watch expands the matrix's version ranges against the index as it stands (or stood,
``--as-of``), runs only the cells that have no result yet (new releases, new code), appends
what it learned to the matrix's history, finds changes along the release axis with statistics
(``changes``), bisects a new break, and publishes a history page, feeds and badges
(``page``, ``publish``). The command itself -- one watch, its summary and its exit status --
is ``harness/investigate/watcher.py``, above the runner and the search it drives; the pieces here are below
the report, which publishes their pages too:

- ``expand``    -- the index as of a moment, pre-releases when the matrix's ``watch:`` asks;
- ``history``   -- the append-only record (``<results>/<matrix>/.watch/``) and its lock;
- ``series``    -- the history turned into release series per cell, host and launch;
- ``page``      -- the history page of the site;
- ``changes``   -- the statistics: shifts and status changes along a release axis;
- ``changelog`` -- the change log's entries (``claims.Change``), their stable ids, JSON and one-line wording;
- ``publish``   -- the feed / badge writers.
"""
