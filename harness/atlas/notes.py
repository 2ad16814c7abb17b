"""What the projects' release notes say, held against the atlas's rows at every publication.

Where a row disagrees with a release note -- an API the notes say is gone still works, a default
they say changed did not -- the atlas is wrong until shown otherwise: the harness may have built the
wrong stack or read the wrong module. Each `Note` is one sentence of a project's notes, where it
is written, and the rows it constrains; `check` returns, per note, the rows it applies to and those
that disagree. The page prints every note with its verdict, so a disagreement is on the page the day
it appears, not in a reviewer's memory. `REPORTS` does the same for failure families: a public
report that names one is linked from every change it explains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from packaging.version import Version

from harness import status as st
from harness.atlas.rows import Row, parse_version
from harness.workloads.protocol import NO_CUDNN


@dataclass(frozen=True)
class Note:
    says: str                                 # the release note, in a sentence of our own
    source: str                               # where the project says it
    applies: Callable[[Row], bool]            # the rows it speaks of
    holds: Callable[[Row], bool]              # what such a row must show



def _tf_at_least(row: Row, version: str) -> bool:
    tf = parse_version(row.stack.get("tensorflow"))
    return tf is not None and tf >= Version(version)


def _keras3(row: Row) -> bool:
    return row.line.startswith("keras3")


def _column_statuses(row: Row, model: str) -> list[tuple[str, str]]:
    return [(e.status, e.family) for e in row.entries.values() if e.records[0]["model"] == model]


NOTES = (
    Note("From TensorFlow 2.16, tf.keras is Keras 3 unless tf-keras is installed and asked for.",
         "https://github.com/tensorflow/tensorflow/releases/tag/v2.16.1",
         lambda r: _tf_at_least(r, "2.16") and r.stack.get("keras_api") != "tf_keras",
         lambda r: (r.stack.get("keras") or "").startswith("3.")),
    Note("Keras 3 has no CuDNNGRU or CuDNNLSTM layer: its GRU and LSTM use cuDNN by themselves.",
         "https://keras.io/guides/migrating_to_keras_3/",
         _keras3,
         lambda r: all(s == st.UNSUPPORTED and "Keras 3 has no" in f for s, f in _column_statuses(r, "cudnn_gru"))),
    Note("TensorFlow 2 keeps CuDNNGRU in tf.compat.v1.keras.layers; it runs on NVIDIA GPUs only.",
         "https://www.tensorflow.org/api_docs/python/tf/compat/v1/keras/layers/CuDNNGRU",
         lambda r: r.line == "keras2" and _tf_at_least(r, "2.0"),
         lambda r: all(s == st.UNSUPPORTED and f == NO_CUDNN % "CuDNNGRU"
                       for s, f in _column_statuses(r, "cudnn_gru"))),
    Note("Keras 3's distribution API (DataParallel) runs on the JAX backend.",
         "https://keras.io/api/distribution/",
         lambda r: r.line == "keras3-jax",
         lambda r: all(e.status == st.OK for c, e in r.entries.items() if "data_parallel" in c)),
    Note("Keras 3.0 introduced keras.distribution for large-scale distribution based on JAX: on PyTorch it "
         "places no replicas.",
         "https://github.com/keras-team/keras/releases/tag/v3.0.0",
         lambda r: r.line == "keras3-torch",
         lambda r: all(e.status == st.UNSUPPORTED for c, e in r.entries.items() if "data_parallel" in c)),
)


def check(table: list[Row]) -> list[dict]:
    """Per note: its words and source, how many rows it speaks of, and the rows that disagree."""
    out = []
    for note in NOTES:
        mine = [r for r in table if note.applies(r)]
        out.append({"says": note.says, "source": note.source, "rows": len(mine),
                    "disagree": [r.key for r in mine if not note.holds(r)]})
    return out


@dataclass(frozen=True)
class Report:
    """A public report of a failure family the atlas measured: the words of the family it matches
    (part of its signature), where it is reported, and what the report settles, in our words."""
    family: str
    link: str
    says: str
    reduced: str = ""   # the script `harness reduce` cut down to it, as its issue draft (under docs/)
    example: str = ""   # the example that reproduces it from a user's script


REPORTS = (
    Report("creating distributed tf.Variable with aggregation=MEAN and a non-floating dtype",
           "https://github.com/keras-team/keras/issues/20700",
           "reported against Keras 3.7 (the aggregation of a variable now reaches tf.Variable: "
           "keras-team/keras#20541); the atlas finds it mended in 3.8",
           reduced="reduced/keras3-mirrored-mean.md", example="examples/keras3-mirrored-mean"),
)


def reports(found) -> None:
    """Each change whose failure family a public report names: that report, as evidence, and the
    reduced script and issue draft where a user's script shows it."""
    for change in found:
        for report in REPORTS:
            if report.family in change.detail:
                change.evidence.append({"what": f"public report: {report.says}", "link": report.link})
                if report.reduced:
                    change.evidence.append({"what": f"reduced from a user's script ({report.example}) to the "
                                                    "report upstream asks for", "link": report.reduced})
