"""The findings benchmark (issue 38): its corpus, regenerated with the fixed seed, keeps every detector's
precision and recall at 0.9 or more, and the card in docs/findings.md is the one it prints."""

import importlib.util

import pytest
from conftest import REPO


def _bench():
    spec = importlib.util.spec_from_file_location("bench_findings", REPO / "benchmarks" / "bench_findings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def result():
    return _bench().run_benchmark(seed=0)


@pytest.mark.slow
def test_every_detector_keeps_its_precision_and_recall(result):
    """Each benchmarked detector has runs that have it, and precision and recall >= 0.9 on them."""
    low = {kind: (d["precision"], d["recall"]) for kind, d in result["detectors"].items()
           if not (d["runs"] and d["precision"] is not None and d["precision"] >= 0.9 and d["recall"] >= 0.9)}
    assert low == {}


@pytest.mark.slow
def test_the_card_in_the_docs_is_the_benchmarks(result):
    """docs/findings.md holds the card the benchmark prints (rewrite it with --write-card)."""
    bench = _bench()
    assert bench.card_in_docs() == bench.build_card(result)


def test_labels_follow_the_layout():
    """A phrase hack paid through a TRL reward column is a component hack too; healthy runs have no label."""
    bench = _bench()
    assert bench.labels_of("phrase_hack", "trl") == {"reward_with_spreading_phrases",
                                                     "component_with_spreading_phrases"}
    assert bench.labels_of("phrase_hack", "verl") == {"reward_with_spreading_phrases"}
    assert bench.labels_of("healthy", "board") == set() and bench.labels_of("bilingual", "trl") == set()
