"""A verdict on a dependency bump: what the pull request that moves TensorFlow, Keras, JAX or
NumPy does to the project's own script and the model files it keeps.

The two sides are the project's pins at two revisions (the pull request's base and head) or two
pin files (`revisions`). What moved is judged by `upgrade`'s own search, called through the API
(harness.api.upgrade): the base's pins and the head's releases, each run with repeats so a value
is judged against the base's spread, a break bisected to its first bad release with its
evidence and advice. A bump that cannot be installed gets the joint move that would (`joint`);
every model file the project keeps is read on both stacks by the portability grid's judge
(`models`). The course is `course`; what it writes -- the comment, the JSON, the CI's job
summary -- is `writers`, from the one verdict record only. The harness talks to no forge: it
writes files, and the GitHub Action (action.yml) posts the comment.

The words a verdict says are named here, once."""

SAFE = "safe"                      # same status, values within the base's spread
BREAKS = "breaks"                  # the status changed (or a model file the project keeps is refused)
CHANGES = "changes values"         # accuracy, loss or a reported value past the spread (or a file predicts otherwise)
CANNOT_INSTALL = "cannot install"  # the head's pins do not install together
CANNOT_JUDGE = "cannot judge"      # the base itself does not run here: nothing to judge the head against
NOTHING = "nothing to judge"       # the bump moves no pin up

# The order a verdict takes its headline in: the worst part of the answer
WORST_FIRST = (CANNOT_INSTALL, BREAKS, CANNOT_JUDGE, CHANGES, SAFE, NOTHING)
SCHEMA = "harness-verdict/1"       # verdict.json's version: a tool reading it checks this first
DEFAULT_REPEATS = 3                # runs of each side: a value is judged against the base's own spread
