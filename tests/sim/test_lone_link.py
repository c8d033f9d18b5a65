"""A cut between the leader and one follower does not give the cluster a second leader.

This is why the simulator finds neither a broken lease guard nor read-index reads served
without confirmation by cutting single links (test_guards.py finds them otherwise): the cut-off
follower times out and campaigns in the leader's term, the others still follow the leader
and answer REJECT_ALREADY_HAS_LEADER (rule 6), so its rounds end WAIT_TO_REVOTE and it
never reaches a higher term that could pull them away, with or without the lease guard.
"""

from __future__ import annotations

import pytest

from nodes.core import CoreConfig
from nodes.election import Role
from tests.support.scripted import ScriptedCluster


@pytest.mark.parametrize("lease_guard", [False, True])
@pytest.mark.parametrize("n", [3, 5])
def test_a_follower_cut_off_from_the_leader_alone_stays_in_its_term(n: int, lease_guard: bool) -> None:
    for seed in range(3):
        c = ScriptedCluster(n, seed=seed, config=CoreConfig(lease_guard=lease_guard))
        leader = c.elect()
        term = c.core(leader).term
        cut = next(x for x in c.names if x != leader)
        c.blocked |= {(leader, cut), (cut, leader)}
        c.run(3000)
        assert c.leaders() == [leader], c.describe()
        assert {c.core(x).term for x in c.names} == {term}, c.describe()
        assert c.core(cut).role is Role.CANDIDATE  # it did time out and campaign
