"""Executors decide where and when cells run (this host's resources, a cluster's
queue); engines decide what they run in. See the README's design section."""
