"""Does it train the same on N devices? A certificate per model: the one-device cell against each
multi-device cell of the same stack, workload and global batch, layer by layer and step by step.

The comparison is `diverge`'s (investigate/layerdiff.py), run through the API: the same weights and
batch on both sides, each layer's output, each weight's gradient read as one plain SGD step through
the wrapper, a short training's loss curve, all against a floor measured by running the one-device
side again with each batch's rows in another order. What the certificate adds is the question's own
verdict, and the controls that name an expected difference: a difference the batch split is known
to make (BatchNormalization statistics per replica, a dropout or RNG stream per replica, a loss or
metric reduced per replica) is claimed as expected only when a control -- the same model without
that part, or with it frozen -- agrees on the same stack. The course is `course`; its writers
`writers`. The words it says are named here, once."""

EQUIVALENT = "equivalent"            # within the floor the one-device side measured on itself
EXPECTED = "differs as expected"     # differs, and a control that removes the named part agrees
DIFFERS = "differs"                  # differs, unexplained: the first layer, gradient or epoch, with its size
OUT_OF_RANGE = "metric out of range"  # accuracy above 1, a NaN loss: a finding of its own
CANNOT = "cannot certify"            # the one-device side itself does not run here

# The differences a batch split (or the devices themselves) are known to make, by the key a control
# names (--control NAME=CONTROL:KEY: a workload and its control workload, or an environment and its control
# environment, e.g. the same stack with float32 matrix products at full precision)
KNOWN = {"batchnorm": "BatchNormalization statistics per replica",
         "dropout": "a dropout or RNG stream per replica",
         "reduction": "a loss or metric reduced per replica",
         "precision": "the devices' own float32 arithmetic (a GPU's matrix products at reduced precision, TF32)"}
SCHEMA = "harness-certificate/1"
