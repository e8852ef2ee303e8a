"""The ports' contracts (ports.py), checked when a profile is built."""

from __future__ import annotations

import pytest

from provenance.ports import Profile
from tests.stages.test_decompose import FixedDecomposer


def test_a_profile_makes_claims_exactly_one_way() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Profile(
            name="neither", screener=None, generator=None, verifier=None, worst_case=None, screener_reads_passages=True
        )
    with pytest.raises(ValueError, match="exactly one"):
        Profile(
            name="both",
            screener=None,
            generator=None,
            verifier=None,
            worst_case=None,
            screener_reads_passages=True,
            decomposer=FixedDecomposer([]),
            decompose_and_verify=object(),
        )
