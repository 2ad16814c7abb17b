"""A user's model of 2023: a small convnet for 16x16 greyscale images, trained with tf.keras on
TensorFlow 2.15 and exported as a TensorFlow SavedModel folder -- what `model.save(folder)` wrote
on that release. It knows nothing of the harness."""
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(11)
x = rng.normal(size=(512, 16, 16, 1)).astype("float32")
y = (x[:, :8].mean(axis=(1, 2, 3)) > 0).astype("int64")

model = tf.keras.Sequential([
    tf.keras.layers.Conv2D(8, 3, activation="relu", input_shape=(16, 16, 1)),
    tf.keras.layers.MaxPooling2D(),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(2, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=2, batch_size=64, verbose=2)
model.save("digits_savedmodel")   # a folder: TF 2.15's SavedModel
print("saved digits_savedmodel/")
