"""Makes model.h5, the model file this project keeps: a small classifier trained and saved as HDF5
by the pinned stack (TensorFlow 2.15.1, its Keras 2), as the project first made it. Run once with
the pins of requirements.txt; the file is committed beside it."""

from pathlib import Path

import numpy as np
import tensorflow as tf

from data import features

tf.keras.utils.set_random_seed(0)
x, y = features(0)
model = tf.keras.Sequential([
    tf.keras.layers.Dense(32, activation="relu", input_shape=(16,)),
    tf.keras.layers.Dense(2, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=128, epochs=3, verbose=0)
model.save(Path(__file__).parent / "model.h5")
print("saved model.h5:", model.count_params(), "parameters; accuracy",
      float(np.mean(np.argmax(model.predict(x, verbose=0), axis=1) == y)))
