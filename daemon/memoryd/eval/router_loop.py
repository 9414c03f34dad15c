"""``memoryd eval router-loop``: a simulation of HGP's self-enhancement protocol (Table 6 / Fig. 3).

:func:`run_loop` splits off ``rounds + 1`` disjoint test subsets of a labelled JSONL file
(see :mod:`memoryd.eval.router`), streams the rest through the router starting from the shipped
head and seed set, sends every line whose confidence ``s(x)`` is below ``τ_t`` to a labeller,
pools those labels, runs :func:`memoryd.router.trainer.train_round` every ``retrain_every`` new
labels and swaps the head in when the round accepts it. ``t`` counts *completed* rounds,
accepted or not, as the daemon's loop (:mod:`memoryd.router.enhance`) does: a rejected round
still lowers ``τ_t``. The labeller is :class:`OracleLabeller`, which returns the gold labels:
the simulation measures the mechanism (gate, pool, rounds, acceptance), not the quality of an
LLM labeller.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm import tqdm

from memoryd.errors import InvalidInputError
from memoryd.eval.router import Example, load_line, targets
from memoryd.models import LABELS, Label
from memoryd.router import (
    Pool,
    Router,
    RouterHead,
    SeedSet,
    decide,
    deferral_threshold,
    f1_scores,
    in_pool_holdout,
    label_matrix,
    train_round,
)

__all__ = [
    "LoopReport",
    "OracleLabeller",
    "RoundRow",
    "Split",
    "plot_loop",
    "run_loop",
    "seed_heldout_groups",
    "split_examples",
]

SplitMode = Literal["line", "group"]


class OracleLabeller:
    """Returns the gold labels of a line: a stand-in for the LLM labeller.

    The loop simulation uses it to measure the self-enhancement *mechanism* (deferral gate,
    label pool, training rounds, acceptance), not an LLM: with a real model the pool would
    carry its labelling errors too. ``calls`` counts the lines it was asked to label.
    """

    def __init__(self) -> None:
        self.calls = 0

    def label(self, example: Example) -> tuple[Label, ...]:
        self.calls += 1
        return example.labels


@dataclass(frozen=True)
class Split:
    """Indices into the examples: the training stream (in stream order), ``rounds + 1``
    disjoint test subsets, and ``heldout``: every line not in the stream."""

    mode: SplitMode
    stream: np.ndarray
    tests: tuple[np.ndarray, ...]
    heldout: np.ndarray
    test_groups: frozenset[str] = frozenset()


def _by_label_set(examples: Sequence[Example]) -> dict[tuple[Label, ...], list[str]]:
    strata: dict[tuple[Label, ...], set[str]] = defaultdict(set)
    for e in examples:
        assert e.group is not None
        strata[e.labels].add(e.group)
    return {key: sorted(groups) for key, groups in sorted(strata.items())}


def split_examples(
    examples: Sequence[Example],
    rounds: int,
    test_size: int,
    mode: SplitMode,
    rng_seed: int = 0,
) -> Split:
    """Split ``examples`` into a training stream and ``rounds + 1`` test subsets.

    ``line``: random lines go to the test subsets. ``group``: whole groups (templates) do, so
    no test template is ever in the stream; groups are drawn within each label set until that
    label set has its share of test lines, so every label set is tested. The test lines are
    shuffled and dealt into subsets of ``test_size`` (fewer if the test groups hold fewer
    lines); lines of test groups beyond that are only in ``heldout``.

    Raises:
        InvalidInputError: ``group`` mode with a line that has no group, or too few lines.
    """
    rng = np.random.default_rng(rng_seed)
    n = len(examples)
    wanted = (rounds + 1) * test_size
    if wanted >= n:
        raise InvalidInputError(
            f"{n} lines cannot give {rounds + 1} test subsets of {test_size} and a stream"
        )
    order = rng.permutation(n)
    test_groups: set[str] = set()
    if mode == "line":
        test, stream = order[:wanted], order[wanted:]
    else:
        missing = next((e for e in examples if e.group is None), None)
        if missing is not None:
            raise InvalidInputError(f"line {missing.line} has no 'group': use the line split")
        lines_of: dict[str, int] = defaultdict(int)
        for e in examples:
            lines_of[e.group] += 1  # type: ignore[index]
        share = wanted / n
        for groups in _by_label_set(examples).values():
            target = share * sum(lines_of[g] for g in groups)
            taken = 0
            for index in rng.permutation(len(groups)):
                if taken >= target:
                    break
                test_groups.add(groups[index])
                taken += lines_of[groups[index]]
        in_test = np.array([examples[i].group in test_groups for i in order])
        test, stream = order[in_test], order[~in_test]
        if len(stream) == 0:
            raise InvalidInputError("the group split left no line for the stream")
    size = min(test_size, len(test) // (rounds + 1))
    if size < 1:
        raise InvalidInputError(f"{len(test)} test lines cannot fill {rounds + 1} test subsets")
    tests = tuple(test[k * size : (k + 1) * size] for k in range(rounds + 1))
    return Split(mode, stream, tests, test, frozenset(test_groups))


@dataclass(frozen=True)
class RoundRow:
    """One row of the loop table.

    Round 0 is the starting head before any streaming. Row ``r >= 1`` describes the stream
    segment that filled round ``r``'s labels (routed with ``τ = tau``, i.e. ``τ_{r-1}``; the
    labels its lines were stored under: the oracle's when sent, else the classifier's), the
    round itself (``accepted``, validation macro-F1 of the current and the candidate head) and
    the head in use after it (``temperature``), scored on test subset ``r`` (``macro``,
    ``micro``) and, to tell the head's progress from the subsets' differences, on the whole
    held-out split (``heldout_macro``: the same lines every round).
    """

    round: int
    accepted: bool | None
    macro: float
    micro: float
    test_lines: int
    heldout_macro: float
    tau: float | None = None
    decisions: int = 0
    sent: int = 0
    calls: int = 0
    pool: int = 0
    val_before: float | None = None
    val_after: float | None = None
    temperature: float | None = None
    kept_wrong: int = 0
    stored_macro: float | None = None

    @property
    def share(self) -> float | None:
        """Share of this segment's decisions sent to the labeller."""
        return self.sent / self.decisions if self.decisions else None

    @property
    def kept_error(self) -> float | None:
        """Share of the classifier decisions that stood (s(x) >= τ) with a wrong label set."""
        kept = self.decisions - self.sent
        return self.kept_wrong / kept if kept else None


@dataclass
class LoopReport:
    """What :func:`run_loop` measured (see :meth:`format`)."""

    path: Path
    head_path: Path
    split: Split
    examples: int
    seed_lines: int
    seed_val: int
    rounds_wanted: int
    retrain_every: int
    tau0: float
    beta: float
    tau_min: float
    rng_seed: int
    rows: list[RoundRow]
    final: dict[str, float]
    final_novel: tuple[int, dict[str, float]] | None
    seed_overlap: int
    stopped: str
    final_head: RouterHead
    load: str = field(default_factory=load_line)

    def format(self) -> str:
        split = self.split
        sizes = {len(t) for t in split.tests}
        size = sizes.pop() if len(sizes) == 1 else sorted(sizes)
        if split.mode == "group":
            how = f"whole templates: {len(split.test_groups)} groups never in the stream"
        else:
            how = "random lines (their templates are in the stream too)"
        lines = [
            f"Self-enhancement loop on {self.path} ({self.examples} lines), split={split.mode} "
            f"(rng seed {self.rng_seed}): stream {len(split.stream)} lines; "
            f"{len(split.tests)} test subsets of {size} lines from {how}; "
            f"held-out split {len(split.heldout)} lines",
            f"start: head {self.head_path} and the seed set ({self.seed_lines} lines, "
            f"{self.seed_val} of them validation); lines also in the seed set: "
            f"{self.seed_overlap}",
            f"gate: s(x) < tau_t = max({self.tau_min:.2f}, {self.tau0:.2f}·e^(-{self.beta:g}·t)), "
            f"t = completed rounds (accepted or not); a round every {self.retrain_every} "
            "labeller calls; labeller = oracle (gold labels, stands in for the LLM)",
            f"{self.load}",
            "",
            f"{'round':>5} {'accepted':>8} {'macroF1':>8} {'microF1':>8} {'all-macro':>9} "
            f"{'tau':>6} {'routed':>7} {'sent':>5} {'share':>6} {'calls':>6} {'pool':>5} "
            f"{'kept-err':>8} {'stored-F1':>9} {'val macro cur->new':>19} {'temp':>6}",
        ]

        def num(value: float | None, spec: str, width: int) -> str:
            return f"{value:{width}{spec}}" if value is not None else f"{'-':>{width}}"

        for row in self.rows:
            accepted = "-" if row.accepted is None else ("yes" if row.accepted else "no")
            val = (
                f"{row.val_before:.4f}->{row.val_after:.4f}"
                if row.val_before is not None and row.val_after is not None
                else "-"
            )
            lines.append(
                f"{row.round:5d} {accepted:>8} {row.macro:8.4f} {row.micro:8.4f} "
                f"{row.heldout_macro:9.4f} {num(row.tau, '.3f', 6)} {row.decisions:7d} "
                f"{row.sent:5d} {num(row.share, '.1%', 6)} {row.calls:6d} {row.pool:5d} "
                f"{num(row.kept_error, '.1%', 8)} {num(row.stored_macro, '.4f', 9)} "
                f"{val:>19} {num(row.temperature, '.3f', 6)}"
            )
        lines += [
            "columns: macroF1/microF1 on the round's own test subset; all-macro: the same head "
            "on the whole held-out split; tau, routed, sent, share: the stream segment before the "
            "round; kept-err: classifier decisions kept (s(x) >= tau) with a wrong label set; "
            "stored-F1: macro-F1 of the labels the segment's lines were stored under (oracle when "
            "sent); val: the round's validation macro-F1, current -> candidate head; temp: the "
            "temperature of the head in use after the round",
        ]
        lines += [
            "",
            self.stopped,
            f"final head on the whole held-out split ({len(split.heldout)} lines): "
            f"macro-F1 {self.final['macro']:.4f}, micro-F1 {self.final['micro']:.4f} ("
            + ", ".join(f"{lb} {self.final[str(lb)]:.3f}" for lb in LABELS)
            + ")",
        ]
        if self.final_novel is not None:
            count, scores = self.final_novel
            lines.append(
                f"  of which {count} lines of templates no head trained on (the seed's held-out "
                f"templates, not in the stream): macro-F1 {scores['macro']:.4f}, "
                f"micro-F1 {scores['micro']:.4f}"
            )
        return "\n".join(lines)


def _scores(
    head: RouterHead, threshold: float, x: np.ndarray, texts: list[str], y: np.ndarray
) -> dict[str, float]:
    return f1_scores(y, decide(head, x, texts, threshold))


def _pool_key(text: str) -> str:
    """The pool's held-out key of a line: a content hash, like a turn id the client left out."""
    return hashlib.sha256(text.encode()).hexdigest()


def run_loop(
    examples: Sequence[Example],
    vectors: np.ndarray,
    seed: SeedSet,
    head: RouterHead,
    split: Split,
    *,
    path: Path,
    head_path: Path,
    retrain_every: int,
    tau0: float,
    beta: float,
    tau_min: float,
    threshold: float,
    rng_seed: int = 0,
    labeller: OracleLabeller | None = None,
    seed_heldout_groups: frozenset[str] | None = None,
) -> LoopReport:
    """Simulate the self-enhancement loop; see the module docstring and :class:`RoundRow`.

    Args:
        examples, vectors: the labelled lines and their embeddings (same order).
        seed: the embedded seed set every round trains and validates on.
        head: the starting head (round 0; the shipped one in the daemon).
        split: from :func:`split_examples`; ``len(split.tests) - 1`` rounds are wanted.
        labeller: called for every deferred line (a fresh :class:`OracleLabeller` if None).
        seed_heldout_groups: the groups of the seed's held-out lines, if known: the final
            report then also scores the held-out lines of templates no head trained on.
    """
    labeller = labeller or OracleLabeller()
    texts = [e.text for e in examples]
    y_all = targets(examples)

    def score(current: RouterHead, idx: np.ndarray) -> dict[str, float]:
        return _scores(current, threshold, vectors[idx], [texts[i] for i in idx], y_all[idx])

    rounds_wanted = len(split.tests) - 1
    start = score(head, split.tests[0])
    rows = [
        RoundRow(
            0,
            None,
            start["macro"],
            start["micro"],
            len(split.tests[0]),
            score(head, split.heldout)["macro"],
        )
    ]
    pool_x: list[np.ndarray] = []
    pool_y: list[np.ndarray] = []
    pool_texts: list[str] = []
    pool_holdout: list[bool] = []
    router = Router(head, threshold)
    position = 0
    stopped = f"stopped after {rounds_wanted} rounds"
    stream = split.stream
    for r in range(1, rounds_wanted + 1):
        # t = completed rounds: r - 1 here, whether they were accepted or not.
        tau = deferral_threshold(r - 1, tau0, beta, tau_min)
        decisions = sent = kept_wrong = 0
        gold: list[tuple[Label, ...]] = []
        stored: list[tuple[Label, ...]] = []
        with tqdm(
            total=retrain_every, desc=f"round {r} labels", unit="label", file=sys.stderr
        ) as bar:
            while sent < retrain_every and position < len(stream):
                i = int(stream[position])
                position += 1
                decisions += 1
                decision = router.route(vectors[i], texts[i])
                gold.append(examples[i].labels)
                if decision.confidence >= tau:
                    stored.append(decision.labels)
                    kept_wrong += decision.labels != examples[i].labels
                else:
                    labels = labeller.label(examples[i])
                    stored.append(labels)
                    pool_x.append(vectors[i])
                    pool_y.append(label_matrix([labels])[0])
                    pool_texts.append(texts[i])
                    pool_holdout.append(in_pool_holdout(_pool_key(texts[i])))
                    sent += 1
                    bar.update(1)
        if sent < retrain_every:
            stopped = (
                f"stream exhausted ({len(stream)} lines) during round {r}: {decisions} lines "
                f"routed, {sent} sent to the labeller (< {retrain_every}); no round {r} trained"
            )
            break
        pool = Pool(
            np.stack(pool_x),
            np.stack(pool_y),
            tuple(pool_texts),
            np.array(pool_holdout, dtype=bool),
        )
        result = train_round(seed, pool, router.head, threshold)
        if result.accepted:
            router = Router(result.head, threshold)
        scores = score(router.head, split.tests[r])
        rows.append(
            RoundRow(
                round=r,
                accepted=result.accepted,
                macro=scores["macro"],
                micro=scores["micro"],
                test_lines=len(split.tests[r]),
                heldout_macro=score(router.head, split.heldout)["macro"],
                tau=tau,
                decisions=decisions,
                sent=sent,
                calls=labeller.calls,
                pool=len(pool),
                val_before=result.f1_before["macro"],
                val_after=result.f1_after["macro"],
                temperature=router.head.temperature,
                kept_wrong=kept_wrong,
                stored_macro=f1_scores(label_matrix(gold), label_matrix(stored))["macro"],
            )
        )
    final = score(router.head, split.heldout)
    final_novel = None
    if seed_heldout_groups is not None and split.mode == "group":
        novel = np.array(
            [i for i in split.heldout if examples[i].group in seed_heldout_groups], dtype=int
        )
        if len(novel):
            final_novel = (len(novel), score(router.head, novel))
    seed_texts = {t.casefold().rstrip(" .") for t in seed.texts}
    overlap = sum(t.casefold().rstrip(" .") in seed_texts for t in texts)
    return LoopReport(
        path=path,
        head_path=head_path,
        split=split,
        examples=len(examples),
        seed_lines=len(seed.texts),
        seed_val=int(seed.holdout.sum()),
        rounds_wanted=rounds_wanted,
        retrain_every=retrain_every,
        tau0=tau0,
        beta=beta,
        tau_min=tau_min,
        rng_seed=rng_seed,
        rows=rows,
        final=final,
        final_novel=final_novel,
        seed_overlap=overlap,
        stopped=stopped,
        final_head=router.head,
    )


def seed_heldout_groups(seed: SeedSet, seed_jsonl: Path) -> frozenset[str] | None:
    """Groups of the seed's held-out lines, matched by text in the seed JSONL (None if absent)."""
    if not Path(seed_jsonl).is_file():
        return None
    group_of = {}
    for raw in Path(seed_jsonl).read_text(encoding="utf-8").splitlines():
        if raw.strip():
            data = json.loads(raw)
            group_of[data["text"]] = data.get("group")
    groups = {group_of.get(t) for t, held in zip(seed.texts, seed.holdout, strict=True) if held}
    groups.discard(None)
    return frozenset(groups) or None  # type: ignore[arg-type]


def plot_loop(report: LoopReport, path: Path) -> None:
    """Macro-F1 (and micro-F1), labeller share and τ per round, as a PNG (headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [row.round for row in report.rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(rounds, [row.macro for row in report.rows], "o-", label="macro-F1")
    top.plot(rounds, [row.micro for row in report.rows], "s--", label="micro-F1", alpha=0.7)
    top.plot(
        rounds,
        [row.heldout_macro for row in report.rows],
        "d:",
        color="grey",
        label="macro-F1, whole held-out split",
    )
    top.set_ylabel("F1")
    top.set_title(f"self-enhancement loop, split={report.split.mode}, oracle labeller")
    top.legend(loc="lower right")
    top.grid(alpha=0.3)
    segment = [row for row in report.rows if row.share is not None]
    bottom.plot(
        [row.round for row in segment], [row.share for row in segment], "o-", label="sent share"
    )
    bottom.plot(
        [row.round for row in segment], [row.tau for row in segment], "^--", label="tau (segment)"
    )
    bottom.set_ylim(0, 1.05)
    bottom.set_xlabel("round")
    bottom.set_ylabel("share / threshold")
    bottom.legend(loc="lower left")
    bottom.grid(alpha=0.3)
    bottom.set_xticks(rounds)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
