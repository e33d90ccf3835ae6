"""Hypothesis strategies for fuzzing the YAML files users write: any value a YAML document
can hold (null, bool, int, float with NaN, text, lists, mappings), with the file's own
words mixed in so that the fuzz reaches past the first type check."""

from __future__ import annotations

from hypothesis import strategies as st


def yaml_values(words: list[str], keys: list[str], int_bound: int, size: int,
                max_leaves: int):
    """Nested YAML values: scalars (``words`` among the texts, integers within
    +-``int_bound``), lists and mappings of at most ``size`` entries (``keys`` among the
    mapping keys), ``max_leaves`` scalars in all."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-int_bound, int_bound),
                        st.floats(allow_nan=True), st.text(max_size=8), st.sampled_from(words))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=size),
        st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(keys)), inner,
                        max_size=size)), max_leaves=max_leaves)
