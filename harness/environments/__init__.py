"""Building a stack's environment: the installer (uv), base images, interpreters on the host, one
builder per environment (the lock), the build ledger, and the replay recipes a bundle carries."""
