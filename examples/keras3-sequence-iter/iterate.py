"""A user's data class, written the way the Keras docs show a Sequence: batches sliced out of
arrays by index, with a length. The user's own code walks it with a for loop (to look at the
batches, to count labels) before training.

A for loop over an object without __iter__ falls back to __getitem__(0), (1), ... until an
IndexError -- and slicing past the end of an array raises none: it gives empty batches,
forever. So whether the loop ends depends on whether Keras's Sequence class defines __iter__
(bounded by __len__). Run as the cell of examples/keras3-sequence-iter/matrix.yaml."""
import numpy as np
import keras
from workloads.metrics import report


class Batches(keras.utils.Sequence):
    def __init__(self, x, y, batch_size):
        super().__init__()
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return int(np.ceil(len(self.x) / self.batch_size))

    def __getitem__(self, index):
        part = slice(index * self.batch_size, (index + 1) * self.batch_size)
        return self.x[part], self.y[part]


rng = np.random.RandomState(0)
x = rng.normal(size=(100, 4)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
batches = Batches(x, y, batch_size=32)

seen = empty = 0
for bx, by in batches:
    seen += 1
    empty += int(len(bx) == 0)
    if seen >= 3 * len(batches):  # the guard a real loop does not have: it would never end
        break

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy")
history = model.fit(batches, epochs=2, verbose=0)  # fit itself walks len(batches) batches

report("length", len(batches))
report("batches_in_loop", seen)
report("empty_batches", empty)
report("fit_epochs", len(history.history["loss"]))
