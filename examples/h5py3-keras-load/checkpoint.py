"""A user's training script on TensorFlow 1.12 / Keras 2.2.4: train a small classifier, keep
the best epoch in an HDF5 checkpoint, then load it back to evaluate -- the everyday
ModelCheckpoint + load_model round trip.

h5py 3.0 changed what reading a string attribute gives back (str, not bytes), and Keras
2.2.4's loader calls .decode() on what it reads: with h5py 3 the checkpoint it has just
written cannot be loaded. Publicly reported as tensorflow/tensorflow#44467. Run as the cell
of examples/h5py3-keras-load/matrix.yaml."""
import os

import numpy as np
import keras
from workloads.metrics import report

rng = np.random.RandomState(0)
x = rng.normal(size=(512, 8)).astype("float32")
y = keras.utils.to_categorical((x[:, :4].sum(axis=1) > 0).astype("int32"), 2)

model = keras.models.Sequential([
    keras.layers.Dense(16, activation="relu", input_shape=(8,)),
    keras.layers.Dense(2, activation="softmax"),
])
model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
best = os.path.join(os.getcwd(), "best.h5")
keep = keras.callbacks.ModelCheckpoint(best, monitor="loss", save_best_only=True)
history = model.fit(x, y, batch_size=64, epochs=3, verbose=0, callbacks=[keep])

restored = keras.models.load_model(best)
agree = np.mean(np.argmax(restored.predict(x), 1) == np.argmax(model.predict(x), 1))
report("epochs", len(history.history["loss"]))
report("restored_agreement", float(agree))
