"""A user's Keras 3 training script on the TensorFlow backend, data-parallel on two devices with
tf.distribute.MirroredStrategy: a small classifier built and compiled inside the strategy's scope,
then trained and evaluated.

Two logical CPU devices stand for two GPUs (the same strategy, the same variables). On TensorFlow
2.18, Keras 3.6 trains it; Keras 3.7.0 stops while building the model, at its Dropout layer: the
layer's seed generator keeps an integer state variable, which 3.7 creates with a MEAN aggregation
that MirroredStrategy refuses for a non-floating dtype (keras-team/keras#20700); Keras 3.8.0
trains it again. Run as the cell
of examples/keras3-mirrored-mean/matrix.yaml."""
import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402 - after the devices are configured
from workloads.metrics import report  # noqa: E402

rng = np.random.default_rng(3)
x = rng.normal(size=(512, 8)).astype("float32")
y = (x[:, :3].argmax(axis=1)).astype("int32")

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = keras.Sequential([
        keras.Input((8,)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(3, activation="softmax"),
    ])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
history = model.fit(x[:448], y[:448], epochs=5, batch_size=64, verbose=0)
scores = model.evaluate(x[448:], y[448:], verbose=0, return_dict=True)
report("replicas", strategy.num_replicas_in_sync)
report("val_accuracy", float(scores["accuracy"]))
