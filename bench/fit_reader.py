"""Fit the judge's reader of the question (services/judging/reader.py) and store its weights.

    python bench/fit_reader.py [--corpora squad,python-reference,numpy-api,handbook] [--epochs 2]
                               [--lr 4e-4] [--seed 0] [--pointwise 0] [--out services/judging/reader_model.safetensors]

Groups are drawn from every answerable question of the train half of each corpus (bench/judge_set.py's
test_half holds the other half out): the question's gold phrase against up to five other phrases
of its passage of the gold's type (judge_set's same-passage draw, eight seeds), and the question
asked as "..., A or B?" with the gold and one of them (or its own two options). Each phrase is
read as the judge reads it: where its evidence sentence holds its added words
(services.judging.features.reader_phrase). The packaged model gets low-rank updates on every
linear layer and a head on [CLS], fitted by the cross-entropy of each group's softmax with the
gold first; the small corpora's groups weigh SMALL_WEIGHT times SQuAD's, so that 150 questions of
API docs are not drowned by 1,450 Wikipedia ones. The set is rebuilt from the repo and ../shared
on every run, so the weights can be reproduced (torch's seed is set; CPU float sums may differ
in the last bits). Prints how often the test half's gold phrase is read above each other phrase
of its group, per corpus, and above every other phrase of the corpus's test groups ("across": the
judge reads a logit on its own, not against its group's); `--pointwise` adds a per-phrase binary
cross-entropy to each group's softmax, which alone fixes only differences within a group. Last
stdout line: {"version", "ordered", "ordered_across", ...}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, log, machine, rounded  # noqa: E402
from bench.judge import auroc  # noqa: E402

SMALL_WEIGHT = 4.0  # python-reference, numpy-api, the handbook: each has a tenth of SQuAD's questions
DRAWS, MAX_OTHERS = 8, 5
GROUPS_A_STEP = 4


@dataclass(frozen=True)
class Group:
    corpus: str
    split: str
    kind: str  # "passage" (other phrases of the passage) or "option"
    question: str
    phrases: tuple  # services.judging.reader.Phrase, the gold first


def groups(corpora: list[str], undrawn: bool = False) -> list[Group]:
    """Each corpus's groups, split as bench/judge_set.py splits its questions; with `undrawn`, the
    test half's questions that bench/judge.py never draws (at its defaults) are trained on as well
    (SQuAD's: the other corpora's questions are all drawn)."""
    from bench._judge_sources import load, passage
    from bench._judge_text import question_options, value_type, with_options
    from bench.judge_set import _same_passage, drawn, test_half
    from services.judging.features import read_words, reader_phrase

    def read(question: str, phrase: str, text: str):  # type: ignore[no-untyped-def]
        return reader_phrase(read_words(question, phrase, (text,)))

    out = []
    for name in corpora:
        corpus, started = load(name), time.perf_counter()
        held_out = test_half(corpus)
        if undrawn:
            held_out &= {q.qid for q in drawn(corpus)}
        for q in sorted(corpus.questions, key=lambda q: q.qid):
            split = "test" if q.qid in held_out else "train"
            text, start, end = passage(corpus.docs[q.doc], q.start, q.end)
            vtype = value_type(q.answer)
            others = list(dict.fromkeys(o for k in range(DRAWS)
                                        if (o := _same_passage(corpus, q, text, (start, end), vtype,
                                                               random.Random(f"reader/{name}/{q.qid}/{k}")))))[:MAX_OTHERS]
            gold = read(q.question, q.answer, text)
            read_others = [p for o in others if (p := read(q.question, o, text)) is not None and p != gold]
            if gold is not None and read_others:
                out.append(Group(name, split, "passage", q.question, (gold, *read_others)))
            options = question_options(q.question)
            if options is not None and q.answer.lower() in (o.lower() for o in options):
                asked, other = q.question, next(o for o in options if o.lower() != q.answer.lower())
            elif others:
                other = others[0]
                first, second = (q.answer, other) if random.Random(f"reader/{name}/{q.qid}/option").random() < 0.5 \
                    else (other, q.answer)
                asked = with_options(q.question, first, second)
            else:
                continue
            pair = read(asked, q.answer, text), read(asked, other, text)
            if pair[0] is not None and pair[1] is not None and pair[0] != pair[1]:
                out.append(Group(name, split, "option", asked, pair))
        log(f"{name}: {sum(g.corpus == name for g in out)} groups in {time.perf_counter() - started:.0f} s")
    return out


class LowRank:
    """Builds the trainable model: the packaged model's linear layers with low-rank updates, and a head."""

    @staticmethod
    def wrap(bert):  # type: ignore[no-untyped-def]
        import torch

        from services.judging.reader import RANK, SCALE, TARGETS

        class Updated(torch.nn.Module):
            def __init__(self, base: torch.nn.Linear) -> None:
                super().__init__()
                self.base = base
                self.down = torch.nn.Parameter(torch.empty(RANK, base.in_features))
                self.up = torch.nn.Parameter(torch.zeros(base.out_features, RANK))
                torch.nn.init.kaiming_uniform_(self.down, a=math.sqrt(5))

            def forward(self, x):  # type: ignore[no-untyped-def]
                return self.base(x) + SCALE * (x @ self.down.T) @ self.up.T

        for p in bert.parameters():
            p.requires_grad_(False)
        for layer in bert.encoder.layer:
            for target in TARGETS:
                *path, leaf = target.split(".")
                parent = layer
                for part in path:
                    parent = getattr(parent, part)
                setattr(parent, leaf, Updated(getattr(parent, leaf)))
        return bert


def logits(bert, head, tokenizer, batch: list[tuple], context_tokens: int | None = None):  # type: ignore[no-untyped-def]
    """One logit per (question, phrase) of `batch`, reading at most `context_tokens` of the sentence
    on each side of the phrase (None: all that fit)."""
    from services.judging.reader import model_inputs

    return head(bert(**model_inputs(tokenizer, batch, context_tokens)).last_hidden_state[:, 0]).squeeze(-1)


def ordered(bert, head, tokenizer, picked: list[Group], context_tokens: int | None) -> tuple[float | None, float | None]:  # type: ignore[no-untyped-def]
    """The share of (gold, other) pairs of `picked` whose gold is read higher, within each group
    and across the groups (every gold against every other phrase: the judge reads a logit on its
    own, so it must rank a question's gold above another question's wrong phrase too)."""
    import torch

    pairs = wins = 0
    golds: list[float] = []
    others: list[float] = []
    with torch.inference_mode():
        for g in picked:
            read = logits(bert, head, tokenizer, [(g.question, p) for p in g.phrases], context_tokens).tolist()
            pairs += len(read) - 1
            wins += sum(read[0] > r for r in read[1:])
            golds.append(read[0])
            others.extend(read[1:])
    if not pairs:
        return None, None
    return wins / pairs, auroc([1] * len(golds) + [0] * len(others), golds + others)


def standardize(bert, head, tokenizer, train: list[Group], context_tokens: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Shift and scale the head so that the train groups' logits have mean 0 and deviation 1: the
    groups' softmax fixes only differences, so the level a fit ends at is arbitrary, and the
    judge's signal (services.judging.features) reads the logit on this scale."""
    import torch

    with torch.inference_mode():
        read = torch.cat([logits(bert, head, tokenizer, [(g.question, p) for g in train[i:i + 16] for p in g.phrases],
                                 context_tokens)
                          for i in range(0, len(train), 16)])
    mean, std = float(read.mean()), float(read.std())
    with torch.no_grad():
        head.weight /= std
        head.bias.sub_(mean).div_(std)
    return {"mean": round(mean, 4), "std": round(std, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpora", default="squad,python-reference,numpy-api,handbook")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=4e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--undrawn", action="store_true",
                        help="also train on the test half's questions bench/judge.py never draws (SQuAD's)")
    parser.add_argument("--pointwise", type=float, default=0.0,
                        help="weight of a per-phrase binary cross-entropy (gold 1, others 0) beside each group's softmax")
    parser.add_argument("--context-tokens", type=int, default=None,
                        help="read at most N of the sentence's tokens on each side of the phrase (default: all that fit)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import copy

    import torch
    from safetensors.torch import save_file

    from services.judging import reader
    from services.retrieval.embedding import load_model, tokenizer_copy

    started = time.perf_counter()
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    built = groups(args.corpora.split(","), args.undrawn)
    train = [g for g in built if g.split == "train"]
    test = [g for g in built if g.split == "test"]
    log(f"{len(train)} train groups, {len(test)} test groups in {time.perf_counter() - started:.0f} s")

    bert = LowRank.wrap(copy.deepcopy(load_model(reader.MODEL)[0].auto_model))
    head = torch.nn.Linear(bert.config.hidden_size, 1)
    tokenizer, _ = tokenizer_copy(reader.MODEL)
    trained = [p for p in bert.parameters() if p.requires_grad] + list(head.parameters())
    optimizer = torch.optim.AdamW(trained, lr=args.lr, weight_decay=0.01)
    steps = args.epochs * math.ceil(len(train) / GROUPS_A_STEP)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 50) * max(0.0, 1 - s / steps))
    order = random.Random(args.seed)
    for epoch in range(args.epochs):
        bert.train()
        shuffled = order.sample(train, len(train))
        for i in range(0, len(shuffled), GROUPS_A_STEP):
            step = shuffled[i:i + GROUPS_A_STEP]
            read = logits(bert, head, tokenizer, [(g.question, p) for g in step for p in g.phrases], args.context_tokens)
            loss, at, weight = read.new_zeros(()), 0, 0.0
            for g in step:
                w = 1.0 if g.corpus == "squad" else SMALL_WEIGHT
                group = read[at:at + len(g.phrases)]
                loss = loss + w * torch.nn.functional.cross_entropy(group[None], read.new_zeros(1, dtype=torch.long))
                if args.pointwise:  # the gold and the mean of the others weigh alike
                    bce = torch.nn.functional.binary_cross_entropy_with_logits
                    gold, others = bce(group[:1], group.new_ones(1)), bce(group[1:], group.new_zeros(len(group) - 1))
                    loss = loss + w * args.pointwise * (gold + others) / 2
                at, weight = at + len(g.phrases), weight + w
            optimizer.zero_grad()
            (loss / weight).backward()
            optimizer.step()
            schedule.step()
            if (i // GROUPS_A_STEP) % 200 == 0:
                log(f"epoch {epoch + 1} step {i // GROUPS_A_STEP}/{steps // args.epochs} loss {float(loss.detach()) / weight:.3f}")
        log(f"epoch {epoch + 1}: {time.perf_counter() - started:.0f} s")
    bert.eval()
    standardized = standardize(bert, head, tokenizer, train, args.context_tokens)

    by = defaultdict(list)
    for g in test:
        by[(g.corpus, g.kind)].append(g)
    read = {f"{corpus}/{kind}": ordered(bert, head, tokenizer, picked, args.context_tokens)
            for (corpus, kind), picked in sorted(by.items())}
    result = {name: rounded(within) for name, (within, _) in read.items()}
    across = {name: rounded(pooled) for name, (_, pooled) in read.items()}
    weights = {name: p.detach().half().contiguous() for name, p in bert.named_parameters() if p.requires_grad}
    weights |= {"head.weight": head.weight.detach().half(), "head.bias": head.bias.detach().half()}
    version = f"reader-{dt.datetime.now(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    meta = {"version": version, "model": reader.MODEL, "rank": reader.RANK, "scale": reader.SCALE,
            "context_tokens": args.context_tokens, "undrawn": args.undrawn, "pointwise": args.pointwise,
            "epochs": args.epochs, "lr": args.lr, "seed": args.seed, "corpora": args.corpora.split(","), "golds": "audited",
            "train_groups": len(train), "standardized_from": standardized, "test_ordered": result, "test_ordered_across": across,
            "machine": machine(),
            "fit_s": round(time.perf_counter() - started)}
    out = args.out or reader.WEIGHTS
    save_file(weights, str(out))
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    emit({"version": version, "ordered": result, "ordered_across": across, "train_groups": len(train), "fit_s": meta["fit_s"]})


if __name__ == "__main__":
    main()
