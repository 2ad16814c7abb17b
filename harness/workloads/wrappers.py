"""Multi-device wrappers, by the names cell ids use.

``none`` trains the model as built, on the default device.
"""
from .compat import Unsupported


def wrap(stack, model, parallelism):
    """Return the model to compile and fit for this parallelism."""
    name = parallelism["wrapper"]
    if name == "none":
        if int(parallelism["devices"]) != 1:
            raise Unsupported("wrapper 'none' trains on one device, %s were asked"
                              % parallelism["devices"])
        return model
    raise Unsupported("wrapper %r is not available in this version of the workloads" % name)
