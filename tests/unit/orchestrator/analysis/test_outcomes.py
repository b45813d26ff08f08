"""A setting's outcome per problem: its mean is the setting's score, for pass@1 (one and several
samples) and for InfiBench's best@10 against the official statistic on the official responses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis.outcomes import best_of_outcomes, mean_outcomes, outcomes_of_counts
from workers.benchmarks.infibench.aggregate import aggregate
from workers.benchmarks.infibench.scores import ResponseScore, ResponseStatus
from workers.benchmarks.infibench.suite import load_suite
from workers.scoring import problem_counts


def pass1_outcomes(task_ids, passed):
    """Execution rows' outcomes as the report reads them: their counts per problem."""
    return outcomes_of_counts(problem_counts(task_ids, passed))


def test_pass1_outcomes_are_pass_fail_for_one_sample_and_c_over_n_for_several():
    one = pass1_outcomes(["p/1", "p/0", "p/2"], [True, False, True])
    assert one.binary and one.task_ids == ("p/0", "p/1", "p/2")
    assert one.values.tolist() == [False, True, True] and one.score == pytest.approx(2 / 3)
    several = pass1_outcomes(["a", "a", "a", "b", "b", "b"], [True, False, False, True, True, True])
    assert not several.binary and several.values.tolist() == pytest.approx([1 / 3, 1.0])
    cell = mean_outcomes([one, pass1_outcomes(["p/0", "p/1", "p/2"], [True, True, False])])
    assert cell.values.tolist() == pytest.approx([0.5, 1.0, 0.5])
    with pytest.raises(ValueError, match="different problems"):
        mean_outcomes([one, several])


def test_best_of_10_averages_to_the_official_statistic_on_the_official_responses(shared_data):
    suite = load_suite(shared_data / "infibench")
    folder = shared_data / "infibench" / "official_results" / "v2.1_full_suite"
    frame = pd.read_csv(folder / "per_response_scores.csv")
    checked = 0
    for _, rows in frame.groupby("model"):
        official = aggregate(
            suite,
            [
                ResponseScore(r.case_path, r.case_id, r.sample_idx, ResponseStatus.SCORED, r.score)
                for r in rows.itertuples()
            ],
        )
        ours = best_of_outcomes(
            rows["case_path"].tolist(), rows["sample_idx"].tolist(), rows["score"].tolist()
        )
        assert len(ours.task_ids) == len(suite.cases) == 234
        assert 100 * ours.score == pytest.approx(official.overall.pct, abs=1e-9)
        assert np.all((ours.values >= 0) & (ours.values <= 1))
        checked += 1
    assert checked == 3


def test_an_unscorable_response_makes_its_question_zero_as_the_official_statistic_does():
    tasks = ["q1"] * 20 + ["q2"] * 20
    index = list(range(20)) * 2
    scores = [1.0] * 10 + [0.5] * 10 + [1.0] * 19 + [None]
    scored = [True] * 39 + [False]
    out = best_of_outcomes(tasks, index, scores, scored)
    assert out.values.tolist() == [0.75, 0.0]  # q1: mean of the group bests 1.0 and 0.5
    graded_error = best_of_outcomes(tasks, index, [1.0] * 40, [True] * 20 + [False] + [True] * 19)
    assert graded_error.values.tolist() == [1.0, 0.0]
