"""Executors decide *where and when* cells run (this host's resources, or a
cluster's queue); engines decide *in what environment*. An executor never
knows images or pip. See the README's design section."""
