"""Version ranges against the real package index, and from the offline cache.

Small packages only (numpy, six): the lists are a few hundred KiB; nothing is installed
except by the cut-off index test, which downloads one small wheel through it."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import textwrap

import pytest
from packaging.specifiers import SpecifierSet

from harness.environments import installer, interpreters
from harness.index import cutoff, pipsettings, releases
from harness.matrix import load

from .conftest import ROOT, harness

NUMPY_126_TO_20 = ["1.26.0", "1.26.1", "1.26.2", "1.26.3", "1.26.4", "2.0.0", "2.0.1", "2.0.2"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache of our own: what these tests fetch and read is theirs."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_range_expands_to_the_index_releases_in_version_order(cache):
    found = releases.expand("numpy", ">=1.26,<2.1", "3.11")
    assert found.versions == NUMPY_126_TO_20
    assert found.uploaded["2.0.0"].startswith("2024-06-16")       # PEP 700 upload time, UTC
    assert found.index == releases.pip_settings().index
    # one per minor: the newest patch of each
    minor = releases.expand("numpy", ">=1.26,<2.1", "3.11", releases.Options(every="minor"))
    assert minor.versions == ["1.26.4", "2.0.2"]
    # pre-releases only when asked
    pre = releases.expand("numpy", ">=2.2.6,<2.4", "3.11", releases.Options(pre=True))
    assert "2.3.0rc1" in pre.versions and pre.versions.index("2.3.0rc1") < pre.versions.index("2.3.0")
    assert "2.3.0rc1" not in releases.expand("numpy", ">=2.2.6,<2.4", "3.11").versions


def test_releases_that_do_not_fit_the_python_stay_with_the_reason(cache):
    """They become cells that pip refuses (`unavailable` with pip's reason): a finding."""
    found = releases.expand("numpy", ">=1.26,<2.1", "3.6")
    assert found.versions == NUMPY_126_TO_20
    assert set(found.unfit) == set(NUMPY_126_TO_20)
    assert all("requires Python" in why for why in found.unfit.values())
    tf = releases.expand("tensorflow", ">=2.10,<2.13", "3.11", releases.Options(every="minor"))
    assert tf.versions == ["2.10.1", "2.11.1", "2.12.1"]
    assert tf.unfit == {"2.10.1": "no wheel for Python 3.11 on this platform",
                        "2.11.1": "no wheel for Python 3.11 on this platform"}


def test_the_cache_answers_offline_and_when_the_index_is_unreachable(cache, monkeypatch):
    online = releases.expand("numpy", ">=1.26,<2.1", "3.11")
    stored = list((cache / "releases").rglob("numpy.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text())["fetched"] > 0
    offline = releases.expand("numpy", ">=1.26,<2.1", "3.11", offline=True)
    assert offline.versions == online.versions
    # the network goes away (a dead proxy): the cached list is used, and the answer says so
    for var in ("https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    refreshed = releases.expand("numpy", ">=1.26,<2.1", "3.11", refresh=True)
    assert refreshed.versions == online.versions
    assert "cached" in refreshed.note and "cannot reach" in refreshed.note
    with pytest.raises(releases.ReleasesUnavailable, match="no list of six's releases is cached"):
        releases.expand("six", ">=1.0", "3.11", offline=True)


RANGE_MATRIX = textwrap.dedent("""
    name: ranges
    environments:
      - python: "3.11"
        keras: "3.0.5"
        backend: jax
        packages: ["jax==0.4.25", "jaxlib==0.4.25", {numpy: ">=1.26,<2.1"}]
      - {python: "3.11", tensorflow: ">=2.15,<2.17", packages: ["numpy<2"]}
    releases: {every: minor}
    workloads:
      - {model: dense, features: 8, widths: [4], samples: 64}
    """)


def test_a_matrix_with_ranges_lists_its_cells_and_records_what_they_were(cache, tmp_path):
    path = tmp_path / "ranges.yaml"
    path.write_text(RANGE_MATRIX)
    proc = harness("list", str(path), "--results", str(tmp_path / "results"), check=True,
                   env={"HARNESS_CACHE": str(cache)})
    ids = proc.stdout.split()
    assert ids == ["keras3.0.5-jax-numpy1.26.4/dense/none-c1/b128/r0",
                   "keras3.0.5-jax-numpy2.0.2/dense/none-c1/b128/r0",
                   "tf2.15.1/dense/none-c1/b128/r0", "tf2.16.2/dense/none-c1/b128/r0"]
    # the range as packaging prints it (its order is packaging's, not ours): compared as a range
    shown = re.search(r"numpy (\S+) for Python 3\.11: 2 release\(s\) 1\.26\.4, 2\.0\.2", proc.stderr)
    assert shown and SpecifierSet(shown.group(1)) == SpecifierSet(">=1.26,<2.1"), proc.stderr
    # each range environment resolves as of its newest pinned release's upload (+ the margin)
    m = load(path)
    env = {c.environment.name: c.environment for c in m.cells}
    assert env["keras3.0.5-jax-numpy1.26.4"].uploaded_before.startswith("2024-02-")   # keras 3.0.5 / jax 0.4.25
    assert env["keras3.0.5-jax-numpy2.0.2"].uploaded_before.startswith("2024-08-2")    # numpy 2.0.2
    [(package, spec, version)] = env["tf2.16.2"].ranges
    assert (package, version) == ("tensorflow", "2.16.2") and SpecifierSet(spec) == SpecifierSet(">=2.15,<2.17")
    # what a run records is what later runs expand to, until --refresh-releases
    m.resolver.record(tmp_path / "results" / "ranges")
    record = tmp_path / "results" / "ranges" / releases.RECORD
    data = json.loads(record.read_text())
    for exp in data["expansions"].values():
        if exp["package"] == "numpy":
            exp["versions"] = ["1.26.4"]   # as if the index had had only this one then
    record.write_text(json.dumps(data))
    again = harness("list", str(path), "--results", str(tmp_path / "results"), check=True).stdout.split()
    assert [i for i in again if "numpy" in i] == ["keras3.0.5-jax-numpy1.26.4/dense/none-c1/b128/r0"]
    # repro looks cells up as the run expanded them: the cell that ran, not one the index added since
    from harness.investigate.repro import find_cells
    later = "keras3.0.5-jax-numpy2.0.2/*"
    assert find_cells(later, [path], tmp_path / "results") == []
    assert [c.id for c, _ in find_cells(later, [path], tmp_path / "no-run-here")] == [later.replace("*", "") +
                                                                                     "dense/none-c1/b128/r0"]
    proc = harness("repro", later, "--matrix", str(path), "--results", str(tmp_path / "results"),
                   "--out", str(tmp_path / "bundles"))
    assert proc.returncode == 2 and "no cell matches" in proc.stderr, proc.stderr
    fresh = harness("list", str(path), "--results", str(tmp_path / "results"), "--refresh-releases",
                    check=True).stdout.split()
    assert fresh == ids


def test_range_problems_are_one_line_each_with_file_and_key(cache, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent("""
        environments:
          - {python: "3.11", tensorflow: ">=2.15,<2.17", packages: [{numpy: "1.26"}, {a: ">=1", b: ">=2"}]}
          - {python: "3.11", tensorflow: ">=99"}
          - {python: "3.11", keras: "3.0.5", backend: jax, packages: [{no-such-package-harness-test: ">=1"}]}
        releases: {evry: minor, every: major}
        workloads: [{model: dense}]
        """))
    proc = harness("list", str(path), env={"HARNESS_CACHE": str(cache)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    err = " ".join(proc.stderr.split())
    for needle in ("releases.evry: unknown key; did you mean 'every'?",
                   "releases.every: expected one of patch, minor, got 'major'",
                   "environments[0].packages[0].numpy: '1.26' is not a range",
                   "environments[0].packages[1]: a range is one package and its range",
                   "environments[1].tensorflow: no release of tensorflow in >=99 for Python 3.11",
                   "environments[2].packages[0]: cannot list the releases of no-such-package-harness-test"):
        assert needle in err, needle
    offline = harness("list", str(path), "--offline", env={"HARNESS_CACHE": str(cache / "empty")})
    assert offline.returncode == 2 and "offline, and no list of tensorflow's releases is cached" in offline.stderr


def test_the_cutoff_index_serves_only_what_was_uploaded_before(cache, tmp_path):
    """The route for pips without --uploaded-prior-to (Python 3.6's, in the lock's resolution and TF 1.x
    GPU images): pip itself, asked for `six`, gets the newest release uploaded before the cut-off
    (six 1.12.0, December 2018)."""
    python = interpreters.find("3.6", {})
    if python is None:
        pytest.skip("no Python 3.6 interpreter on this host")
    with cutoff.CutoffIndex("2019-06-01T00:00:00Z") as index:
        cert = ["--cert", os.environ["PIP_CERT"]] if os.environ.get("PIP_CERT") else []
        proc = subprocess.run([python[0], "-m", "pip", "download", "--isolated", "--no-deps", *cert,
                               "--index-url", index.url, "six", "--dest", str(tmp_path / "dl")],
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p.name for p in (tmp_path / "dl").iterdir()] == ["six-1.12.0-py2.py3-none-any.whl"]


def test_a_cached_list_answers_only_for_a_cut_off_before_its_fetch_and_the_lock_asks_the_index(cache, monkeypatch):
    """A list cached at noon knows nothing uploaded in the afternoon: it serves a cut-off before noon,
    but the cut-off index for tomorrow fetches the list again. A release that appears later under an
    earlier upload time (a mirror catching up) is seen only by asking the index, as the project's lock
    does (refresh), never through a young cached copy."""
    from .planted_index import PlantedIndex
    now = dt.datetime.now(dt.timezone.utc)
    stamp = lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    with PlantedIndex({"latecomer": {"1.0": "2024-01-10T12:00:00Z"}}) as served:
        monkeypatch.setenv("PIP_INDEX_URL", served.url)
        monkeypatch.setattr(pipsettings, "_settings", None)
        monkeypatch.setattr(releases, "_read", {})

        def listed(moment: str, refresh: bool = False) -> list[str]:
            releases._read.clear()
            page, code = cutoff.CutoffIndex(moment, refresh=refresh).page("latecomer")
            assert code == 200
            return sorted(set(re.findall(r">latecomer-([0-9.]+)-py3", page)))

        assert listed("2025-01-01T00:00:00Z") == ["1.0"]                  # fetched now, cached
        served.plant("latecomer", "1.1", stamp(now - dt.timedelta(minutes=5)))
        served.plant("latecomer", "1.2", "2024-06-01T00:00:00Z")           # appears now, dated 2024
        assert listed("2025-01-01T00:00:00Z") == ["1.0"]                  # the young copy still answers
        assert listed(stamp(now + dt.timedelta(days=1))) == ["1.0", "1.1", "1.2"]  # fetched before it: asked again
        served.plant("latecomer", "1.3", "2024-07-01T00:00:00Z")
        assert listed("2025-01-01T00:00:00Z") == ["1.0", "1.2"]
        assert listed("2025-01-01T00:00:00Z", refresh=True) == ["1.0", "1.2", "1.3"]


def test_pip_26_is_the_first_with_the_option():
    assert cutoff.pip_has_cutoff("26.0") and cutoff.pip_has_cutoff("26.3")
    assert not cutoff.pip_has_cutoff("25.3") and not cutoff.pip_has_cutoff("21.3.1")
    assert not cutoff.pip_has_cutoff(None)


def test_python_3_6_resolves_as_of_its_cutoff_sdists_and_all(tmp_path):
    """Python 3.6, whose newest pip (21.3.1) has no --uploaded-prior-to, and whose week's absl-py is an
    sdist: TF 1.12 with Keras 2.2.5 (a range) resolves its unpinned NumPy, h5py and protobuf as of
    August 2019 (uv's --exclude-newer), in a real virtualenv, and trains."""
    path = tmp_path / "tf1.yaml"
    path.write_text(textwrap.dedent("""
        name: tf1-range
        environments:
          - {python: "3.6", tensorflow: "1.12.0", keras: ">=2.2.5,<2.2.6", packages: ["numpy<1.17", "h5py<3"]}
        workloads:
          - {model: rnn, layers: 1, units: 8, dense: 4, timesteps: 4, features: 4, samples: 256}
        """))
    proc = harness("run", str(path), "--engine", "venv", "--results", str(tmp_path / "results"), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = next(json.loads(p.read_text()) for p in (tmp_path / "results" / "tf1-range").rglob("result.json"))
    assert result["status"] == "ok" and result["seen"]["keras"] == "2.2.5"
    assert result["seen"]["numpy"] == "1.16.4"            # the newest NumPy < 1.17 of August 2019 (1.16.6 came later)
    cutoff = result["provenance"]["cutoff"]
    assert cutoff["uploaded_before"] == "2019-08-23T16:47:06Z" and "--exclude-newer" in cutoff["via"]
    assert list(cutoff["excepted"]) == ["pip"]   # the user's tool; setuptools 40.8.0 was out by then


def test_an_image_build_gets_the_cutoff_too(docker_client, tmp_path):
    """The Docker engine: uv in the image build resolves as of the cut-off too. NumPy 2.0.0's
    environment gets June 2024's SciPy, and JAX 0.4.25 still fails on NumPy 2's copy=False."""
    matrix = ROOT / "examples" / "numpy2-copy" / "matrix.yaml"
    proc = harness("run", str(matrix), "--engine", "docker", "--only", "*numpy2.0.0*",
                   "--results", str(tmp_path / "results"), timeout=1800)
    found = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("result.json")]
    assert found, (proc.returncode, proc.stdout[-3000:] + proc.stderr[-3000:])  # the run's own words if it left none
    result = found[0]
    assert result["engine"] == "docker", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert result["status"] == "error" and "Unable to avoid copy" in result["error"]["signature"]
    cutoff = result["provenance"]["cutoff"]
    assert cutoff["uploaded_before"] == "2024-06-17T13:24:44Z" and "--exclude-newer" in cutoff["via"]
    lock = docker_client.containers.run(result["provenance"]["image"], ["cat", "/opt/env/requirements.lock"],
                                        remove=True).decode()
    assert "scipy==1.13.1" in lock and "numpy==2.0.0" in lock    # SciPy as of June 2024, not today's
    # its bundle remakes that image from the same freeze, not from the pins resolved on the day of a rebuild
    proc = harness("repro", result["cell"], "--matrix", str(matrix), "--engine", "docker",
                   "--out", str(tmp_path / "bundles"), timeout=1800)
    [bundle] = [p.parent for p in (tmp_path / "bundles").rglob("run.sh")]
    assert (bundle / "environment" / "requirements.txt").read_text().splitlines()[1:] == \
        [line for line in installer.plain_pins(lock).splitlines() if line.strip()], \
        proc.stdout[-2000:] + proc.stderr[-2000:]   # its releases: the seeded setuptools by version, not path
    assert "the pip freeze of the image the cell ran in" in (bundle / "run.sh").read_text()


def test_many_ranges_are_refused_within_seconds(tmp_path):
    """Bounded work for any matrix: ranges are counted, and what they expand to, before
    anything is built (each range may ask the index; each release is an environment)."""
    import time
    many = "\n".join(f'  - {{python: "3.11", keras: "3.0.5", backend: jax, name: e{i}, '
                     f'packages: [{{numpy: ">=1.{i}"}}]}}' for i in range(60))
    path = tmp_path / "many.yaml"
    path.write_text(f"environments:\n{many}\nworkloads: [{{model: dense}}]\n")
    started = time.monotonic()
    proc = harness("list", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "the version ranges expand to more than 500 environments" in proc.stderr
    assert time.monotonic() - started < 30
    ranges = "\n".join(f'  - {{python: "3.11", keras: "3.0.5", backend: jax, name: e{i}, '
                       f'packages: [{{numpy: ">=2.0.0,<2.0.1"}}]}}' for i in range(51))
    path.write_text(f"environments:\n{ranges}\nworkloads: [{{model: dense}}]\n")
    proc = harness("list", str(path))
    assert proc.returncode == 2 and "environments[50]: at most 50 version ranges in one matrix" in proc.stderr


def test_a_long_range_is_summarised_and_listed_whole_with_verbose(cache, tmp_path):
    """`numpy: ">=1.0"` expands to a hundred-odd releases, most without a wheel for Python 3.11:
    by default a line per finding, each short (first ... last, count, the reason); every release
    and cut-off date with --verbose (issue 31: one line of ~5,000 characters before)."""
    path = tmp_path / "long.yaml"
    path.write_text('environments: [{python: "3.11", tensorflow: "2.15.0", packages: [{numpy: ">=1.0"}]}]\n'
                    "workloads: [{name: d, model: dense}]\n")
    proc = harness("list", str(path), "--results", str(tmp_path / "results"), check=True,
                   env={"HARNESS_CACHE": str(cache)})
    [exp] = load(path).resolver.used.values()
    assert len(exp["versions"]) > releases.SHOWN and len(exp["unfit"]) > releases.SHOWN, exp
    lines = proc.stderr.splitlines()
    assert all(len(line) < 400 for line in lines), max(lines, key=len)
    first, last = exp["versions"][0], exp["versions"][-1]
    assert any(f"{len(exp['versions'])} release(s) {first} ... {last}" in line for line in lines), proc.stderr
    unfit = [int(re.search(r": (\d+) release", line).group(1)) for line in lines if "no file for Python 3.11" in line]
    assert sum(unfit) == len(exp["unfit"]), proc.stderr  # one line per reason, with its count
    assert "list --verbose" in proc.stderr
    verbose = harness("list", str(path), "--results", str(tmp_path / "results"), "--verbose", check=True,
                      env={"HARNESS_CACHE": str(cache)})
    named = set(re.findall(r"[0-9][0-9a-z.]*[0-9a-z]", verbose.stderr))
    assert set(exp["versions"]) <= named and set(exp["unfit"]) <= named
    assert verbose.stdout == proc.stdout
