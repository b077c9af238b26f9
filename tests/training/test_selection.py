import pytest

from bert_pipeline.training.selection import best_mean_rate


def _trial(tag: str, lr: float, seed: int, score: float) -> dict:
    return {**({"tag": tag} if tag else {}), "learning_rate": lr, "seed": seed, "best_score": score}


def test_the_rate_with_the_best_mean_wins_over_one_lucky_seed():
    trials = [
        _trial("", 1e-4, 1, 0.90),  # the best single trial, in the worse mean
        _trial("", 1e-4, 2, 0.50),
        _trial("", 1e-3, 1, 0.80),
        _trial("", 1e-3, 2, 0.80),
    ]
    assert best_mean_rate(trials) == trials[2:]


def test_a_tag_is_a_grid_axis_and_a_tie_goes_to_the_earlier():
    trials = [
        _trial("dropout_0.1", 1e-3, 1, 0.70),
        _trial("dropout_0", 1e-3, 1, 0.75),
        _trial("dropout_0", 1e-4, 1, 0.75),
    ]
    assert best_mean_rate(trials) == [trials[1]]


def test_means_equal_but_for_float32_rounding_are_a_tie():
    """475 of 747 hold-out answers right in both rates, as float32 accuracies of three seeds."""
    first = [0.6184738874435425, 0.6144578456878662, 0.6746987700462341]  # 154, 153, 168 of 249
    second = [0.6224899888038635, 0.6224899888038635, 0.6626505851745605]  # 155, 155, 165
    trials = [_trial("", 1e-4, k, s) for k, s in enumerate(first)]
    trials += [_trial("", 3e-4, k, s) for k, s in enumerate(second)]
    assert best_mean_rate(trials) == trials[:3]


def test_no_trials_is_an_error_that_says_so():
    with pytest.raises(ValueError, match="no trials"):
        best_mean_rate([])
