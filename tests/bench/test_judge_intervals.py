"""bench/judge.py's intervals: a bootstrap over whole questions, not over single answers."""

from __future__ import annotations

from bench.judge import auroc, auroc_interval, difference_interval


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


def test_a_gain_is_read_on_the_same_questions() -> None:
    # Eight questions whose answers are ordered well or badly as a whole; the second scorer orders
    # one more pair of each question right. Apart, each figure's interval is wide (which questions
    # are drawn decides it); paired, the draw moves both alike and the gain stands clear of 0.
    labels, before, after, questions = [], [], [], []
    for q in range(8):
        good = q % 2 == 0
        for i in range(10):
            right = i % 2
            labels.append(right)
            value = (i if good == bool(right) else -i) + q * 100
            before.append(value)
            after.append(value + (50 if right and i == 1 else 0))  # one more right answer on top
            questions.append(q)
    measured, low, high = difference_interval(labels, before, after, questions, resamples=300)  # type: ignore[misc]
    assert measured == auroc(labels, after) - auroc(labels, before) > 0  # type: ignore[operator]
    assert 0 < low <= measured <= high
    apart = auroc_interval(labels, before, questions, resamples=300)
    assert apart is not None and apart[1] - apart[0] > 2 * (high - low)


def test_no_gain_against_itself() -> None:
    labels = [i % 2 for i in range(40)]
    values = [((i * 13) % 7) / 7 + 0.2 * (i % 2) for i in range(40)]
    assert difference_interval(labels, values, values, [i // 4 for i in range(40)], resamples=100) == [0.0, 0.0, 0.0]
