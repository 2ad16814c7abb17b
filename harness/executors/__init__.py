"""Executors decide *where and when* cells run (this host, or a cluster's queue);
engines decide *in what environment*. An executor never knows images or pip."""
