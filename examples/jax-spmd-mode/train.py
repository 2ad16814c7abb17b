"""A user's Keras 3 training script on the JAX backend: a small regression model, a
validation split, early stopping, then an evaluation and a prediction.

Keras 3.0 to 3.9 enter `jax.spmd_mode("allow_all")` around fit() and evaluate(); JAX had
made that mode the default long before and removed the name in jax 0.6.1, so with Keras
pinned at 3.9.2 a jax upgrade from 0.6.0 to 0.6.1 stops every fit() with an AttributeError
(keras-team/keras#21164 removed the call, released in Keras 3.10.0; the JAX change is
jax-ml/jax@7634230). Run as the cell of examples/jax-spmd-mode/matrix.yaml."""
import numpy as np
import keras
from workloads.metrics import report

rng = np.random.default_rng(7)
x = rng.normal(size=(600, 6)).astype("float32")
w = rng.normal(size=(6, 1)).astype("float32")
y = x @ w + 0.1 * rng.normal(size=(600, 1)).astype("float32")
x_train, y_train, x_test, y_test = x[:500], y[:500], x[500:], y[500:]

model = keras.Sequential([
    keras.Input((6,)),
    keras.layers.Dense(32, activation="relu"),
    keras.layers.Dense(1),
])
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True)
history = model.fit(x_train, y_train, validation_split=0.2, epochs=20, batch_size=50,
                    callbacks=[stop], verbose=0)

scores = model.evaluate(x_test, y_test, verbose=0, return_dict=True)
first = model.predict(x_test[:5], verbose=0)
report("epochs_run", len(history.history["loss"]))
report("test_mae", float(scores["mae"]))
report("predictions", len(first))
