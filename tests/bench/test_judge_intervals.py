"""bench/judge.py's intervals: a bootstrap over whole questions, not over single answers."""

from __future__ import annotations

from bench.judge import auroc, auroc_interval


def test_a_perfect_ordering_has_no_spread() -> None:
    labels = [1, 0] * 20
    values = [0.9, 0.1] * 20
    assert auroc_interval(labels, values, [i // 2 for i in range(40)], resamples=200) == [1.0, 1.0]


def test_the_interval_holds_the_measured_figure_and_repeats_with_its_seed() -> None:
    labels = [i % 2 for i in range(60)]
    values = [((i * 37) % 11) / 11 + 0.3 * (i % 2) for i in range(60)]
    questions = [i // 4 for i in range(60)]
    low, high = auroc_interval(labels, values, questions, resamples=300)  # type: ignore[misc]
    measured = auroc(labels, values)
    assert measured is not None and low < measured < high
    assert auroc_interval(labels, values, questions, resamples=300) == [low, high]


def test_answers_of_one_question_are_resampled_together() -> None:
    # Four questions of 50 answers: on two every right answer is above every wrong one, on two
    # below. Which questions a resample draws decides the figure, so the interval is wide; drawn
    # answer by answer it would be about 0.1 wide around 0.5.
    labels, values, questions = [], [], []
    for q in range(4):
        for i in range(50):
            right = i % 2
            labels.append(right)
            values.append(q * 10 + (5 + i / 100 if right == (q % 2) else i / 100))
            questions.append(q)
    low, high = auroc_interval(labels, values, questions, resamples=400)  # type: ignore[misc]
    assert high - low > 0.3
    by_answer = auroc_interval(labels, values, list(range(len(labels))), resamples=400)
    assert by_answer is not None and by_answer[1] - by_answer[0] < 0.2


def test_no_interval_without_both_labels_or_resamples() -> None:
    assert auroc_interval([1, 1], [0.2, 0.3], [0, 1]) is None
    assert auroc_interval([1, 0], [0.2, 0.3], [0, 1], resamples=0) is None
