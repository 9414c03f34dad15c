"""Word tokens of chat text: lower-cased, stopwords out. Shared by routing, extraction, the
full-text query and retrieval, so that all of them agree on what a content word is.

BM25 with lowercasing and stopwords beats whitespace BM25 by 10-20 points of recall on chat
turns (``docs/decisions.md``, "Stopword BM25 over whitespace BM25").
"""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "content_tokens"]

STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves also just did does get got like really yeah
    yes oh ok okay hey hi one s t d ll m re ve""".split()
)

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def content_tokens(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` without stopwords, in order, duplicates removed."""
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(text.lower()):
        token = match.group(0)
        if token not in STOPWORDS and token.replace("'", "") not in STOPWORDS:
            seen.setdefault(token.replace("'", ""), None)
    return list(seen)
