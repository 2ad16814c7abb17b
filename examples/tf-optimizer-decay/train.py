"""A training script written for TF 2.x's tf.keras, as many were: Adam with the Keras 2
`decay` argument (time-based learning-rate decay: lr / (1 + decay * iterations)).

Run as the cell of examples/tf-optimizer-decay/matrix.yaml; `harness bisect` finds the
TensorFlow release from which it stops working."""
import numpy as np
import tensorflow as tf
from workloads.metrics import report

rng = np.random.RandomState(0)
x = rng.normal(size=(512, 8)).astype("float32")
y = (x[:, :4].sum(axis=1) > 0).astype("float32")

model = tf.keras.Sequential([
    tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
    tf.keras.layers.Dense(1, activation="sigmoid"),
])
optimizer = tf.keras.optimizers.Adam(learning_rate=0.01, decay=0.01)
model.compile(optimizer=optimizer, loss="binary_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, batch_size=32, epochs=3, verbose=0)

report("accuracy", round(float(history.history["accuracy"][-1]), 4))
report("steps", int(optimizer.iterations.numpy()))
# The learning rate the next step would use. Keras 2's optimizers apply `decay` themselves
# (`_decayed_lr`); later ones keep the schedule's current value in `learning_rate`.
decayed = getattr(optimizer, "_decayed_lr", None)
lr = decayed(tf.float32) if decayed is not None else optimizer.learning_rate
report("learning_rate_after", round(float(np.asarray(lr)), 7))
