"""`memoryd eval`: LoCoMo and LongMemEval retrieval, semantic facts against LoCoMo's
observations, typed memory and fact updates on scenarios, the fact reader and its judge on
annotated lines, and the router's F1 and self-enhancement loop. Datasets are read in place."""

from memoryd.eval.facts import run_facts
from memoryd.eval.judge import run_judge
from memoryd.eval.locomo import load_locomo, run_locomo
from memoryd.eval.longmemeval import run_longmemeval
from memoryd.eval.reader import run_reader
from memoryd.eval.router import embed_examples, evaluate_router, load_examples
from memoryd.eval.router_loop import plot_loop, run_loop, seed_heldout_groups, split_examples
from memoryd.eval.typed import run_typed
from memoryd.eval.updates import run_updates

__all__ = [
    "embed_examples",
    "evaluate_router",
    "load_examples",
    "load_locomo",
    "plot_loop",
    "run_facts",
    "run_judge",
    "run_locomo",
    "run_longmemeval",
    "run_loop",
    "run_reader",
    "run_typed",
    "run_updates",
    "seed_heldout_groups",
    "split_examples",
]
