"""Proof that a multi-device run used its devices: what really ran, not what was asked.

Asked for N devices, a wrapper can still train on one without a word (Keras
3's ``clear_session()`` silently drops a ``DataParallel`` distribution; TF 2
re-runs a functional graph and forgets construction-time device scopes;
TF 1 soft placement moves ops that have no kernel). So after training each
wrapper is asked for evidence it cannot fake:

* ``data_parallel`` (JAX): the devices the model's variables are sharded or
  replicated over, and whether the distribution is still set;
* ``mirrored``: the replicas in sync and the devices of a mirrored variable;
* ``ratio`` / ``make_parallel`` / ``multi_gpu_model`` in a TF 1 graph: the
  devices that executed the replicas' ops, from a traced run's step stats;
* ``ratio`` / ``make_parallel`` on TF 2: the devices of each replica's output
  in one eager forward pass.

``ran_on`` is the number of distinct devices seen doing the replicas' work,
or None where this stack offers no witness (then ``how`` says so). The host
turns ``ran_on < asked`` into an error.
"""


def _distinct(names):
    return sorted(set(n for n in names if n))


def collect(stack, plan, trainable, x, batch):
    """Evidence for `plan` (a wrappers.Plan) after `trainable` was fitted."""
    if plan.name == "none":
        return None
    try:
        if plan.name == "data_parallel":
            out = _data_parallel(stack, trainable)
        elif plan.name == "mirrored":
            out = _mirrored(plan, trainable)
        elif stack.graph_mode:
            out = _graph_trace(stack, trainable, x[:batch])
        else:
            out = _eager_replicas(trainable, x[:batch])
    except Exception as exc:  # noqa: BLE001 - a witness that fails to answer proves nothing either way
        out = {"ran_on": None, "how": "no evidence: %s: %s" % (type(exc).__name__, str(exc)[:300])}
    out["asked"] = plan.n
    out["wrapper"] = plan.name
    return out


def _data_parallel(stack, model):
    dist = stack.keras.distribution.distribution()
    devices = []
    for var in model.trainable_variables:
        sharding = getattr(getattr(var, "value", var), "sharding", None)
        if sharding is not None:
            devices.extend(str(d) for d in sharding.device_set)
    devices = _distinct(devices)
    return {"ran_on": len(devices), "devices": devices,
            "distribution": type(dist).__name__ if dist is not None else None,
            "how": "devices holding the model's variables (jax sharding)"}


def _mirrored(plan, model):
    strategy = plan.strategy
    devices = []
    for var in model.trainable_variables:
        inner = getattr(var, "value", var)
        values = getattr(inner, "values", None)
        if values is None:
            values = getattr(var, "values", None)
        if values:
            devices = _distinct(v.device for v in values)
            break
    return {"ran_on": min(strategy.num_replicas_in_sync, len(devices)) if devices
            else strategy.num_replicas_in_sync,
            "replicas_in_sync": strategy.num_replicas_in_sync, "devices": devices,
            "how": "replicas in sync and the devices of a mirrored variable"}


def _graph_trace(stack, model, x):
    """Run one traced forward pass; count the devices that executed replica ops."""
    tf = stack.tf
    compat = tf.compat.v1 if hasattr(tf, "compat") and hasattr(tf.compat, "v1") else tf
    backend = stack.keras.backend
    session = backend.get_session()
    options = compat.RunOptions(trace_level=compat.RunOptions.FULL_TRACE)
    metadata = compat.RunMetadata()
    feed = {model.inputs[0]: x}
    try:
        feed[backend.learning_phase()] = 0
    except Exception:  # noqa: BLE001 - models without a learning phase take no such feed
        pass
    session.run(model.outputs, feed_dict=feed, options=options, run_metadata=metadata)
    devices = []
    for stats in metadata.step_stats.dev_stats:
        # TF 1.14+ traces a host-side stream too ("/host:CPU", the ops' launches): not a device
        if "/device:" not in stats.device:
            continue
        if any("replica_" in node.node_name for node in stats.node_stats):
            devices.append(stats.device)
    devices = _distinct(devices)
    return {"ran_on": len(devices), "devices": devices,
            "how": "devices that executed the replicas' ops in a traced run (TF step stats)"}


def _eager_replicas(model, x):
    replicas = None
    for layer in model.layers:
        if getattr(layer, "placed", None) is not None or layer.name == "replicas":
            replicas = layer
    if replicas is None:
        return {"ran_on": None, "how": "no evidence: this wrapper has no replica layer to ask"}
    replicas.record_placement = True
    model(x, training=False)
    replicas.record_placement = False
    devices = _distinct(replicas.placed or [])
    return {"ran_on": len(devices), "devices": devices,
            "how": "devices of each replica's output in an eager forward pass"}
