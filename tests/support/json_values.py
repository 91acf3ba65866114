"""Generated JSON-able values for the property tests of the clients' encoder and the handlers'
parser: every kind where orjson and json could part ways (unbounded and 19-26 digit integers,
NaN and infinities, lone surrogates, integer dict keys, nesting)."""

from __future__ import annotations

from hypothesis import strategies as st

scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: orjson refuses to write them and reads them back as floats
    | st.integers(min_value=-(10**25), max_value=10**25)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(blacklist_categories=()))  # lone surrogates included
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=5)
    ),
    max_leaves=20,
)
