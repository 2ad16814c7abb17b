"""The project's training job: fine-tune the model it keeps (model.h5) on new data.

Written against tf.keras as TensorFlow 2.15 shipped it: the optimizer is
`tf.keras.optimizers.legacy.Adam`, which TensorFlow 2.11 to 2.15 kept for code of the older
optimizers and which Keras 3 -- tf.keras from TensorFlow 2.16 on -- no longer has.
"""

from pathlib import Path

import tensorflow as tf

from data import features
from workloads.metrics import report

x, y = features(1)
model = tf.keras.models.load_model(Path(__file__).parent / "model.h5")
model.compile(optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=1e-3),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, batch_size=128, epochs=2, validation_split=0.25, verbose=0)
report("val_accuracy", float(history.history["val_accuracy"][-1]))
