"""How a cell process is started and given what it needs: the warm launchers and their plan, the
next cell standing by, its variables, caches and confinement, its process group, its GPU memory
policy, and what the host decides before launching it."""
