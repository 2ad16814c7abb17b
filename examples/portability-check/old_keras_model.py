"""A user's model of 2018: a small LSTM that reads sequences of word ids and tells three
classes apart, trained with standalone Keras 2.2.4 on TensorFlow 1.12 and saved the way that
release's tutorials saved it -- one HDF5 file with the architecture, the weights and the
optimizer. It knows nothing of the harness."""
import numpy as np
from keras.layers import LSTM, Dense, Embedding
from keras.models import Sequential

rng = np.random.RandomState(7)
x = rng.randint(1, 500, size=(512, 20))
y = np.eye(3)[(x[:, :5].sum(axis=1) // 10) % 3]

model = Sequential([
    Embedding(500, 16, input_length=20),
    LSTM(24),
    Dense(3, activation="softmax"),
])
model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=2, batch_size=64, verbose=2)
model.save("sentiment.h5")
print("saved sentiment.h5")
