"""A small Keras 2 training script, written against tf.keras as TensorFlow 2.15 shipped it.

It sets its optimizer's learning rate with the `lr` keyword, which Keras 2 accepted (with a
deprecation warning) and Keras 3 -- tf.keras from TensorFlow 2.16 on -- refuses. `harness upgrade`
finds how far TensorFlow can move before this script breaks, and what mends it.
"""

import numpy as np
import tensorflow as tf

from workloads.metrics import report

rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 16)).astype("float32")
y = (x[:, :4].sum(axis=1) > 0).astype("int32")

model = tf.keras.Sequential([
    tf.keras.layers.Dense(32, activation="relu", input_shape=(16,)),
    tf.keras.layers.Dense(2, activation="softmax"),
])
model.compile(optimizer=tf.keras.optimizers.Adam(lr=0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
history = model.fit(x, y, batch_size=128, epochs=4, validation_split=0.25, verbose=0)
report("val_accuracy", float(history.history["val_accuracy"][-1]))
