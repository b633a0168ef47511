"""Γ(H, A, t): one or more tests per exclusion code and per precedence rule (DESIGN §5, SPEC §3-5).

Logs are built with ``helpers``: event ``n`` has id ``e<n>`` and is stamped
``ts(n)`` (T0 + n minutes), so ``ts(n - 0.5)`` is "just before event n".
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import (
    AT,
    A,
    G,
    P,
    R,
    V,
    X,
    actor,
    admitted_ids,
    codes,
    excluded_ids,
    ignored_set,
    log,
    reason,
    run,
    stamp,
    ts,
)

from gamma import (
    DEFAULT_POLICY,
    REASON_CODES,
    Actor,
    Assert,
    Event,
    InputError,
    Policy,
    Resolution,
    load_events,
    load_policy,
    parse_actor,
    resolve,
)
from gamma.core.reading import handbuilt
from gamma.core.reading.events import canonical_event, parse_events
from gamma.core.reading.parsed import ParsedLog
from gamma.core.resolving.resolver import resolve_partition
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.errors import DuplicateIdError, UnknownReferenceError
from gamma.core.terms.model import Retract
from gamma.core.terms.version import __version__

ROOT = Path(__file__).resolve().parent.parent
RECHECK = load_policy(ROOT / "policies" / "recheck.toml")
MULTIVALUE = load_policy(ROOT / "policies" / "multivalue.toml")
IA = "insufficient_authority"


class TestTenantIsolation:
    def test_other_tenant_fact_is_not_listed(self) -> None:
        """Another tenant's fact is neither admitted nor excluded: isolation is total."""
        res = run(
            A("F1", "k", "v1"),
            A("G1", "k", "v2", tenant="globex", status="draft", valid_until=ts(3)),
        )
        assert admitted_ids(res) == ["F1"]
        assert res.excluded_fact("G1") is None
        assert res.to_dict()["excluded"] == []

    def test_other_tenant_same_key_does_not_supersede(self) -> None:
        """A later same-key fact of another tenant neither supersedes nor outranks ours."""
        res = run(A("F1", "k", "v1"), A("G1", "k", "v2", tenant="globex", authority="policy"))
        assert admitted_ids(res) == ["F1"]

    def test_other_tenant_fact_after_t_is_not_listed(self) -> None:
        """Another tenant's fact asserted after t is neither admitted nor excluded."""
        res = run(A("F1", "k", "v1"), A("G1", "k", "v2", tenant="globex"), at=ts(1.5))
        assert excluded_ids(res) == []

    def test_other_tenant_grant_gives_no_sight(self) -> None:
        """A key grant written in another tenant does not open our tenant's fact of that key."""
        res = run(
            A("F1", "k", "v", visibility={"roles": ["hr"]}),
            G(key="k", to_actor="alice", tenant="globex"),
        )
        assert codes(res, "F1") == ("access_denied",)
        assert reason(res, "F1", "access_denied") == (("e1",), ())

    def test_actor_of_other_tenant(self) -> None:
        """Facts are admitted for their own tenant's actor only; the other tenant's are not listed."""
        res = run(
            A("F1", "k", "v1"), A("G1", "k", "v2", tenant="globex"), who=actor("gina", "globex")
        )
        assert admitted_ids(res) == ["G1"]
        assert excluded_ids(res) == []


class TestAccessControl:
    def test_role_listed(self) -> None:
        """A fact listing roles is seen by an actor holding one of them and denied to others."""
        events = (A("F1", "k", "v", visibility={"roles": ["hr", "legal"]}),)
        assert admitted_ids(run(*events, who=actor(roles=["legal"]))) == ["F1"]
        res = run(*events, who=actor(roles=["sales"]))
        assert codes(res, "F1") == ("access_denied",)
        assert reason(res, "F1", "access_denied") == (("e1",), ())

    def test_actor_listed(self) -> None:
        """A fact listing actors is seen by a listed actor only."""
        events = (A("F1", "k", "v", visibility={"actors": ["bob"]}),)
        assert admitted_ids(run(*events, who=actor("bob"))) == ["F1"]
        assert codes(run(*events, who=actor("alice")), "F1") == ("access_denied",)

    def test_roles_or_actors(self) -> None:
        """Listed roles and listed actors are alternatives: either one suffices."""
        events = (A("F1", "k", "v", visibility={"roles": ["hr"], "actors": ["alice"]}),)
        assert admitted_ids(run(*events, who=actor("alice"))) == ["F1"]
        assert admitted_ids(run(*events, who=actor("carol", roles=["hr"]))) == ["F1"]
        assert codes(run(*events, who=actor("dave")), "F1") == ("access_denied",)

    def test_empty_lists_are_an_input_error(self) -> None:
        """Empty roles and actors lists would restrict nobody, silently: refused (issue 11)."""
        with pytest.raises(InputError):
            run(A("F1", "k", "v", visibility={"roles": [], "actors": []}))

    @pytest.mark.parametrize(
        ("clearance", "seen"),
        [("public", False), ("internal", False), ("confidential", True), ("secret", True)],
    )
    def test_clearance_bar(self, clearance: str, seen: bool) -> None:
        """The actor's clearance must rank at or above the fact's."""
        res = run(
            A("F1", "k", "v", visibility={"clearance": "confidential"}),
            who=actor(clearance=clearance),
        )
        assert admitted_ids(res) == (["F1"] if seen else [])

    def test_listed_actor_still_needs_clearance(self) -> None:
        """Being listed does not lift the clearance bar."""
        res = run(
            A("F1", "k", "v", visibility={"actors": ["alice"], "clearance": "secret"}),
            who=actor(clearance="confidential"),
        )
        assert codes(res, "F1") == ("access_denied",)

    def test_unwritten_clearance_is_the_policy_default(self) -> None:
        """A fact without clearance ranks as the policy's default clearance."""
        policy = Policy(clearance_default="internal")
        events = (A("F1", "k", "v"),)
        assert codes(
            run(*events, who=actor(clearance="public", policy=policy), policy=policy), "F1"
        ) == ("access_denied",)
        assert admitted_ids(run(*events, policy=policy)) == ["F1"]


class TestGrants:
    HIDDEN = A("F1", "k", "v", visibility={"roles": ["hr"]})

    def test_grant_of_fact_to_actor(self) -> None:
        """A fact grant to an actor lets that actor see it, and no one else."""
        events = (self.HIDDEN, G(fact="F1", to_actor="alice"))
        assert admitted_ids(run(*events, who=actor("alice"))) == ["F1"]
        res = run(*events, who=actor("bob"))
        assert codes(res, "F1") == ("access_denied",)
        assert reason(res, "F1", "access_denied") == (("e1",), ())

    def test_grant_of_fact_to_role(self) -> None:
        """A fact grant to a role lets holders of that role see it."""
        events = (self.HIDDEN, G(fact="F1", role="sales"))
        assert admitted_ids(run(*events, who=actor(roles=["sales"]))) == ["F1"]
        assert codes(run(*events, who=actor(roles=["ops"])), "F1") == ("access_denied",)

    def test_grant_of_key_covers_later_facts(self) -> None:
        """A key grant covers every fact of that key, also facts asserted after it, and no other key."""
        res = run(
            G(key="k", to_actor="alice"),
            A("F1", "k", "v", visibility={"roles": ["hr"]}),
            A("F2", "k2", "w", visibility={"roles": ["hr"]}),
        )
        assert admitted_ids(res) == ["F1"]
        assert codes(res, "F2") == ("access_denied",)

    def test_grant_does_not_lower_clearance(self) -> None:
        """A granted actor below the fact's clearance is still denied; the reason names the grant."""
        res = run(
            A("F1", "k", "v", visibility={"roles": ["hr"], "clearance": "secret"}),
            G(fact="F1", to_actor="alice"),
            who=actor(clearance="internal"),
        )
        assert codes(res, "F1") == ("access_denied",)
        assert reason(res, "F1", "access_denied") == (("e1", "e2"), ())

    def test_revoke_ends_the_grant(self) -> None:
        """A revoke ends an earlier matching grant; the reason names the assert and the revoke."""
        events = (self.HIDDEN, G(fact="F1", to_actor="alice"), V(fact="F1", to_actor="alice"))
        res = run(*events)
        assert codes(res, "F1") == ("access_denied",)
        assert reason(res, "F1", "access_denied") == (("e1", "e3"), ())
        assert admitted_ids(run(*events, at=ts(2.5))) == ["F1"]

    def test_grant_again_after_revoke(self) -> None:
        """A grant after a revoke opens the fact again."""
        res = run(
            self.HIDDEN,
            G(fact="F1", to_actor="alice"),
            V(fact="F1", to_actor="alice"),
            G(fact="F1", to_actor="alice"),
        )
        assert admitted_ids(res) == ["F1"]

    def test_revoke_of_key_ends_key_grant(self) -> None:
        """A key revoke ends an earlier key grant to the same grantee."""
        res = run(
            self.HIDDEN,
            G(key="k", role="sales"),
            V(key="k", role="sales"),
            who=actor(roles=["sales"]),
        )
        assert codes(res, "F1") == ("access_denied",)

    def test_grant_is_effective_from_its_ts(self) -> None:
        """Resolved before the grant's ts the fact is denied; at the grant's ts it is seen."""
        events = (self.HIDDEN, G(fact="F1", to_actor="alice"))
        before = run(*events, at=ts(1.5))
        assert codes(before, "F1") == ("access_denied",)
        assert reason(before, "F1", "access_denied") == (("e1",), ())
        assert admitted_ids(run(*events, at=ts(2))) == ["F1"]

    def test_revoke_of_another_grantee_keeps_the_grant(self) -> None:
        """Revoking a role does not end a grant made to the actor by name."""
        res = run(
            self.HIDDEN,
            G(fact="F1", to_actor="alice"),
            V(fact="F1", role="sales"),
            who=actor(roles=["sales"]),
        )
        assert admitted_ids(res) == ["F1"]

    def test_granting_twice_then_revoking_once(self) -> None:
        """Granting what is already granted has no effect, so a single revoke ends the grant."""
        res = run(
            self.HIDDEN,
            G(fact="F1", to_actor="alice"),
            G(fact="F1", to_actor="alice"),
            V(fact="F1", to_actor="alice"),
        )
        assert codes(res, "F1") == ("access_denied",)
        assert res.ignored == ()
        assert reason(res, "F1", "access_denied") == (("e1", "e4"), ())

    def test_no_effect_grants_and_revokes_are_not_causes(self) -> None:
        """access_denied names the last event that changed A's access (e4), not a no-effect revoke (e5)."""
        res = run(
            self.HIDDEN,
            V(fact="F1", to_actor="alice"),
            G(fact="F1", to_actor="alice"),
            V(fact="F1", to_actor="alice"),
            V(fact="F1", to_actor="alice"),
        )
        assert reason(res, "F1", "access_denied") == (("e1", "e4"), ())

    def test_revoke_without_grant_has_no_effect(self) -> None:
        """Revoking what was never granted neither hides a public fact nor is an error or ignored."""
        res = run(A("F1", "k", "v"), V(fact="F1", to_actor="alice"))
        assert admitted_ids(res) == ["F1"]
        assert res.ignored == ()

    def test_grant_by_insufficient_authority(self) -> None:
        """A fact grant below the fact's authority is ignored and gives no sight."""
        res = run(
            A("F1", "k", "v", authority="manager", visibility={"roles": ["hr"]}),
            G(fact="F1", to_actor="alice", authority="peer"),
        )
        assert ignored_set(res) == {("e2", IA, "F1")}
        assert codes(res, "F1") == ("access_denied",)
        assert reason(res, "F1", "access_denied") == (("e1",), ())

    def test_revoke_by_insufficient_authority(self) -> None:
        """A revoke below the fact's authority is ignored: the grant stays active."""
        res = run(
            A("F1", "k", "v", authority="manager", visibility={"roles": ["hr"]}),
            G(fact="F1", to_actor="alice", authority="manager"),
            V(fact="F1", to_actor="alice", authority="peer"),
        )
        assert ignored_set(res) == {("e3", IA, "F1")}
        assert admitted_ids(res) == ["F1"]

    def test_key_grant_is_ignored_per_fact_above_it(self) -> None:
        """A key grant applies to facts at or below its authority; ignored once, naming the smallest fact above it."""
        res = run(
            A("F1", "k", "v1", authority="manager", scope="a", visibility={"roles": ["hr"]}),
            A("F2", "k2", "v2", authority="subordinate", visibility={"roles": ["hr"]}),
            A("F3", "k", "v3", authority="executive", scope="b", visibility={"roles": ["hr"]}),
            G(key="k", to_actor="alice", authority="peer"),
            G(key="k2", to_actor="alice", authority="peer"),
            who=actor(scope="a"),
        )
        assert ignored_set(res) == {("e4", IA, "F1")}
        assert codes(res, "F1") == ("access_denied",)
        assert admitted_ids(res) == ["F2"]


class TestScope:
    @pytest.mark.parametrize(
        ("fact_scope", "actor_scope", "seen"),
        [
            ("global", "global", True),
            ("a", "global", False),
            ("global", "a/b", True),
            ("a", "a", True),
            ("a", "a/b", True),
            ("a/b", "a/b", True),
            ("a/b", "a", False),
            ("ab", "a", False),
            ("a", "ab", False),
            ("a/b/c", "a/b", False),
            ("a/c", "a/b", False),
        ],
    )
    def test_containment(self, fact_scope: str, actor_scope: str, seen: bool) -> None:
        """`global` contains every scope, `a` contains `a` and `a/...` but not `ab`; global actors see global facts only."""
        res = run(A("F1", "k", "v", scope=fact_scope), who=actor(scope=actor_scope))
        if seen:
            assert admitted_ids(res) == ["F1"]
        else:
            assert codes(res, "F1") == ("out_of_scope",)
            assert reason(res, "F1", "out_of_scope") == (("e1",), ())

    def test_out_of_scope_fact_does_not_compete(self) -> None:
        """A higher-authority fact outside the actor's scope neither wins nor outranks."""
        res = run(
            A("F1", "k", "v1", authority="executive", scope="b"),
            A("F2", "k", "v2"),
            who=actor(scope="a"),
        )
        assert admitted_ids(res) == ["F2"]
        assert codes(res, "F1") == ("out_of_scope",)

    def test_out_of_scope_propagates_as_dependency_restricted(self) -> None:
        """A fact depending on an out-of-scope fact is restricted (issue 11: it would carry its value)."""
        res = run(
            A("F1", "k", "v1", scope="b"),
            A("F2", "k2", "v2", depends_on=["F1"]),
            who=actor(scope="a"),
        )
        assert admitted_ids(res) == []
        assert reason(res, "F2", "dependency_restricted") == (("e1",), ("F1",))


class TestCommitStatus:
    @pytest.mark.parametrize("status", ["draft", "hypothetical"])
    def test_uncommitted(self, status: str) -> None:
        """A draft or hypothetical fact is excluded with its status as code, naming its assert."""
        res = run(A("F0", "x", 0), A("F1", "k", "v", status=status))
        assert codes(res, "F1") == (status,)
        assert reason(res, "F1", status) == (("e2",), ())

    def test_promote_commits_from_its_ts(self) -> None:
        """A promoted draft is a draft before the promote and admitted from it on."""
        events = (A("F1", "k", "v", status="draft"), P("F1"))
        assert codes(run(*events, at=ts(1.5)), "F1") == ("draft",)
        assert admitted_ids(run(*events, at=ts(2))) == ["F1"]

    def test_promote_by_lower_authority_is_ignored(self) -> None:
        """A promote below the fact's authority does nothing and is listed as ignored."""
        res = run(
            A("F1", "k", "v", status="hypothetical", authority="manager"), P("F1", authority="peer")
        )
        assert codes(res, "F1") == ("hypothetical",)
        assert ignored_set(res) == {("e2", IA, "F1")}

    def test_promote_of_committed_fact_has_no_effect(self) -> None:
        """Promoting a committed fact changes nothing and is not listed as ignored."""
        res = run(A("F1", "k", "v"), P("F1"))
        assert admitted_ids(res) == ["F1"]
        assert res.ignored == ()

    def test_draft_does_not_supersede(self) -> None:
        """A same-key draft leaves the committed fact in place."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2", status="draft"))
        assert admitted_ids(res) == ["F1"]

    def test_promoted_fact_supersedes_at_its_promote(self) -> None:
        """The supersession caused by a promoted fact names the promote as its event."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2", status="draft"), A("F3", "x", 0), P("F2"))
        assert reason(res, "F1", "superseded") == (("e4",), ("F2",))
        assert (
            codes(
                run(
                    A("F1", "k", "v1"),
                    A("F2", "k", "v2", status="draft"),
                    A("F3", "x", 0),
                    P("F2"),
                    at=ts(3),
                ),
                "F1",
            )
            == ()
        )

    def test_commit_order_is_promote_order(self) -> None:
        """A draft asserted first but promoted after a same-key fact commits later and supersedes it."""
        res = run(A("F1", "k", "v1", status="draft"), A("F2", "k", "v2"), P("F1"))
        assert admitted_ids(res) == ["F1"]
        assert reason(res, "F2", "superseded") == (("e3",), ("F1",))


class TestValidityWindow:
    def test_not_yet_valid(self) -> None:
        """Before valid_from the fact is not_yet_valid (naming its assert); from valid_from on it is admitted."""
        events = (A("F1", "k", "v", valid_from=ts(10)),)
        res = run(*events, at=ts(9))
        assert codes(res, "F1") == ("not_yet_valid",)
        assert reason(res, "F1", "not_yet_valid") == (("e1",), ())
        assert admitted_ids(run(*events, at=ts(10))) == ["F1"]

    def test_expired_end_is_exclusive(self) -> None:
        """At valid_until exactly the fact is expired; a microsecond before it is admitted."""
        events = (A("F1", "k", "v", valid_until=ts(10)),)
        res = run(*events, at=ts(10))
        assert codes(res, "F1") == ("expired",)
        assert reason(res, "F1", "expired") == (("e1",), ())
        assert admitted_ids(run(*events, at="2026-03-01T09:09:59.999999Z")) == ["F1"]

    def test_window(self) -> None:
        """A fact with both bounds is admitted only inside [valid_from, valid_until)."""
        events = (A("F1", "k", "v", valid_from=ts(5), valid_until=ts(8)),)
        assert [codes(run(*events, at=ts(m)), "F1") for m in (4, 5, 7, 8)] == [
            ("not_yet_valid",),
            (),
            (),
            ("expired",),
        ]


class TestRetraction:
    def test_retracted_names_the_retract(self) -> None:
        """A retracted fact is excluded with the retract as its event."""
        res = run(A("F1", "k", "v"), R("F1", reason="wrong"))
        assert codes(res, "F1") == ("retracted",)
        assert reason(res, "F1", "retracted") == (("e2",), ())

    def test_retract_by_lower_authority_is_ignored(self) -> None:
        """A retract below the fact's authority is ignored and the fact stays admitted."""
        res = run(A("F1", "k", "v", authority="executive"), R("F1", authority="manager"))
        assert admitted_ids(res) == ["F1"]
        assert ignored_set(res) == {("e2", IA, "F1")}

    def test_retract_by_higher_authority(self) -> None:
        """A retract at or above the fact's authority withdraws it."""
        res = run(A("F1", "k", "v", authority="subordinate"), R("F1", authority="subordinate"))
        assert codes(res, "F1") == ("retracted",)

    def test_first_effective_retract_counts(self) -> None:
        """Retracting a retracted fact has no effect: the first retract is named, nothing is ignored."""
        res = run(A("F1", "k", "v"), R("F1"), R("F1"))
        assert reason(res, "F1", "retracted") == (("e2",), ())
        assert res.ignored == ()

    def test_retract_after_t_has_no_effect(self) -> None:
        """A retract stamped after t does not withdraw the fact at t."""
        assert admitted_ids(run(A("F1", "k", "v"), R("F1"), at=ts(1.5))) == ["F1"]


class TestSupersession:
    def test_same_key_same_scope(self) -> None:
        """A later committed same-key, same-scope fact supersedes the earlier one, naming itself."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2"))
        assert admitted_ids(res) == ["F2"]
        assert codes(res, "F1") == ("superseded",)
        assert reason(res, "F1", "superseded") == (("e2",), ("F2",))

    def test_different_scope_is_not_superseded(self) -> None:
        """Same key in another scope does not supersede: precedence decides per actor."""
        events = (A("F1", "k", "v1"), A("F2", "k", "v2", scope="a"))
        assert admitted_ids(run(*events)) == ["F1"]
        res = run(*events, who=actor(scope="a"))
        assert admitted_ids(res) == ["F2"]
        assert codes(res, "F1") == ("overridden",)

    def test_different_key_is_not_superseded(self) -> None:
        """A later fact of another key leaves the earlier one alone."""
        assert admitted_ids(run(A("F1", "k", "v1"), A("F2", "j", "v2"))) == ["F1", "F2"]

    def test_explicit_supersedes_across_keys(self) -> None:
        """An explicit supersedes entry supersedes its target even across keys."""
        res = run(A("F1", "a", "v1"), A("F2", "b", "v2", supersedes=["F1"]))
        assert admitted_ids(res) == ["F2"]
        assert reason(res, "F1", "superseded") == (("e2",), ("F2",))

    def test_higher_authority_supersedes_lower(self) -> None:
        """A later same-key fact of higher authority supersedes a lower one."""
        res = run(
            A("F1", "k", "v1", authority="subordinate"), A("F2", "k", "v2", authority="manager")
        )
        assert codes(res, "F1") == ("superseded",)

    def test_lower_authority_does_not_supersede_same_key(self) -> None:
        """A later same-key fact of lower authority supersedes nothing; it is outranked, not ignored."""
        res = run(A("F1", "k", "v1", authority="manager"), A("F2", "k", "v2"))
        assert admitted_ids(res) == ["F1"]
        assert reason(res, "F2", "outranked") == (("e1",), ("F1",))
        assert res.ignored == ()

    def test_explicit_supersedes_by_lower_authority_is_ignored(self) -> None:
        """An explicit supersedes below its target's authority is ignored, naming the assert; nothing is superseded."""
        res = run(A("F1", "a", "v1", authority="manager"), A("F2", "b", "v2", supersedes=["F1"]))
        assert admitted_ids(res) == ["F1", "F2"]
        assert ignored_set(res) == {("e2", IA, "F1")}

    def test_ignored_supersedes_partial(self) -> None:
        """Of two explicit targets, only the one above the superseder's authority is spared."""
        res = run(
            A("F1", "a", 1, authority="manager"),
            A("F2", "b", 2),
            A("F3", "c", 3, supersedes=["F1", "F2"]),
        )
        assert admitted_ids(res) == ["F1", "F3"]
        assert codes(res, "F2") == ("superseded",)
        assert ignored_set(res) == {("e3", IA, "F1")}

    def test_retracting_the_newer_does_not_restore(self) -> None:
        """Supersession is permanent: retracting the superseder leaves the older fact superseded."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2"), R("F2"))
        assert admitted_ids(res) == []
        assert codes(res, "F1") == ("superseded",)
        assert codes(res, "F2") == ("retracted",)

    def test_expiry_of_the_newer_does_not_restore(self) -> None:
        """An expired superseder still keeps the older fact superseded."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2", valid_until=ts(5)), at=ts(6))
        assert admitted_ids(res) == []
        assert codes(res, "F1") == ("superseded",)

    def test_hidden_superseder_still_supersedes(self) -> None:
        """Validity does not depend on the viewer: a superseder hidden from A still supersedes."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2", visibility={"roles": ["hr"]}))
        assert admitted_ids(res) == []
        assert codes(res, "F1") == ("superseded",)
        assert codes(res, "F2") == ("access_denied",)

    def test_first_superseder_is_kept(self) -> None:
        """A fact already superseded is not superseded again: its reason keeps naming the first superseder."""
        res = run(A("F1", "a", "v1"), A("F2", "a", "v2"), A("F3", "c", "v3", supersedes=["F1"]))
        assert reason(res, "F1", "superseded") == (("e2",), ("F2",))

    def test_retracted_fact_is_not_superseded(self) -> None:
        """A fact retracted before a same-key successor carries retracted only."""
        res = run(A("F1", "k", "v1"), R("F1"), A("F2", "k", "v2"))
        assert codes(res, "F1") == ("retracted",)

    def test_same_key_off_keeps_both(self) -> None:
        """With same_key = false both values of a key are admitted."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2"), policy=MULTIVALUE)
        assert admitted_ids(res) == ["F1", "F2"]

    def test_same_key_off_still_honours_explicit_supersedes(self) -> None:
        """With same_key = false an explicit supersedes still applies."""
        res = run(
            A("F1", "k", "v1"),
            A("F2", "k", "v2"),
            A("F3", "k", "v3", supersedes=["F1"]),
            policy=MULTIVALUE,
        )
        assert admitted_ids(res) == ["F2", "F3"]
        assert reason(res, "F1", "superseded") == (("e3",), ("F3",))


class TestDeferredEffect:
    def test_supersedes_only_once_in_effect(self) -> None:
        """A newer fact with a later valid_from supersedes only when it takes effect."""
        events = (A("F1", "k", "v1"), A("F2", "k", "v2", valid_from=ts(10)))
        early = run(*events, at=ts(5))
        assert admitted_ids(early) == ["F1"]
        assert codes(early, "F2") == ("not_yet_valid",)
        late = run(*events, at=ts(10))
        assert admitted_ids(late) == ["F2"]
        assert reason(late, "F1", "superseded") == (("e2",), ("F2",))

    def test_withdrawn_before_effect_never_supersedes(self) -> None:
        """A deferred fact retracted before its valid_from never supersedes anything."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2", valid_from=ts(10)), R("F2"), at=ts(20))
        assert admitted_ids(res) == ["F1"]

    def test_deferred_effect_precedes_events_of_that_instant(self) -> None:
        """A deferred effect due at an instant happens before the events stamped at that instant."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2", valid_from=ts(3)), A("F3", "k", "v3"))
        assert admitted_ids(res) == ["F3"]
        assert reason(res, "F1", "superseded") == (("e2",), ("F2",))
        assert reason(res, "F2", "superseded") == (("e3",), ("F3",))

    def test_deferred_effects_of_one_instant_run_in_commit_order(self) -> None:
        """Two deferred effects due at the same instant happen in commit order."""
        res = run(
            A("F1", "k", "v1"),
            A("F2", "k", "v2", valid_from=ts(10)),
            A("F3", "k", "v3", valid_from=ts(10)),
        )
        assert admitted_ids(res) == ["F3"]
        assert reason(res, "F1", "superseded") == (("e2",), ("F2",))
        assert reason(res, "F2", "superseded") == (("e3",), ("F3",))

    def test_deferred_fact_is_superseded_by_a_later_commit(self) -> None:
        """A committed but deferred fact is live, so a later same-key commit supersedes it at once."""
        res = run(A("F1", "k", "v1", valid_from=ts(10)), A("F2", "k", "v2"))
        assert admitted_ids(res) == ["F2"]
        assert codes(res, "F1") == ("superseded",)

    def test_deferred_effect_after_t_does_not_happen(self) -> None:
        """A valid_from after t does not take effect at t, even if the events before t are all folded."""
        res = run(
            A("F1", "k", "v1"), A("F2", "k", "v2", valid_from=ts(10)), A("F3", "j", 0), at=ts(9)
        )
        assert admitted_ids(res) == ["F1", "F3"]


class TestPrecedence:
    def test_authority_beats_specificity(self) -> None:
        """A higher-authority global fact outranks a lower-authority specific one."""
        res = run(
            A("F1", "k", "v1", authority="manager"),
            A("F2", "k", "v2", scope="a"),
            who=actor(scope="a"),
        )
        assert admitted_ids(res) == ["F1"]
        assert codes(res, "F2") == ("outranked",)
        assert reason(res, "F2", "outranked") == (("e1",), ("F1",))

    def test_specificity_among_equal_authority(self) -> None:
        """Among equal authority the more specific scope wins; the loser is overridden."""
        res = run(A("F1", "k", "v1"), A("F2", "k", "v2", scope="a"), who=actor(scope="a/b"))
        assert admitted_ids(res) == ["F2"]
        assert reason(res, "F1", "overridden") == (("e2",), ("F2",))

    def test_specificity_beats_recency(self) -> None:
        """A newer equal-authority fact in a less specific scope loses to the older specific one."""
        res = run(A("F1", "k", "v1", scope="a"), A("F2", "k", "v2"), who=actor(scope="a"))
        assert admitted_ids(res) == ["F1"]
        assert reason(res, "F2", "overridden") == (("e1",), ("F1",))

    def test_recency_decides_last(self) -> None:
        """Same authority and same scope: the newer fact holds the key (the older is superseded)."""
        res = run(
            A("F1", "k", "v1", scope="a"), A("F2", "k", "v2", scope="a"), who=actor(scope="a")
        )
        assert admitted_ids(res) == ["F2"]
        assert codes(res, "F1") == ("superseded",)

    def test_authority_beats_recency(self) -> None:
        """A newer lower-authority fact in the same scope loses to the older higher-authority one."""
        res = run(A("F1", "k", "v1", authority="manager"), A("F2", "k", "v2", authority="peer"))
        assert admitted_ids(res) == ["F1"]
        assert codes(res, "F2") == ("outranked",)

    def test_outranked_versus_overridden(self) -> None:
        """A loser on authority is outranked, a loser on specificity only is overridden."""
        res = run(
            A("F1", "k", "v1", authority="manager", scope="a"),
            A("F2", "k", "v2", scope="a/b"),
            A("F3", "k", "v3", authority="manager"),
            who=actor(scope="a/b"),
        )
        assert admitted_ids(res) == ["F1"]
        assert reason(res, "F2", "outranked") == (("e1",), ("F1",))
        assert reason(res, "F3", "overridden") == (("e1",), ("F1",))

    def test_restricted_winner_still_outranks(self) -> None:
        """A winner hidden from A still wins: A gets no value for the key, never the loser."""
        events = (
            A("F1", "k", "v1", authority="manager", visibility={"roles": ["hr"]}),
            A("F2", "k", "v2", scope="a"),
        )
        res = run(*events, who=actor(scope="a"))
        assert admitted_ids(res) == []
        assert codes(res, "F1") == ("access_denied",)
        assert codes(res, "F2") == ("outranked",)
        assert admitted_ids(run(*events, who=actor(scope="a", roles=["hr"]))) == ["F1"]

    def test_winner_commit_is_the_promote(self) -> None:
        """The outranked reason names the winner's committing event, a promote when it was promoted."""
        res = run(
            A("F1", "k", "v1", authority="manager", status="draft"),
            A("F2", "k", "v2", scope="a"),
            P("F1", authority="manager"),
            who=actor(scope="a"),
        )
        assert reason(res, "F2", "outranked") == (("e3",), ("F1",))

    @pytest.mark.parametrize(
        "loser_kw",
        [{"status": "draft"}, {"valid_until": ts(2)}, {"valid_from": ts(100)}, {"scope": "b"}],
        ids=["draft", "expired", "not-yet-valid", "out-of-scope"],
    )
    def test_only_candidates_compete(self, loser_kw: dict[str, Any]) -> None:
        """A higher-authority fact that is not a candidate (draft, expired, not yet valid, out of scope) outranks nothing."""
        res = run(
            A("F1", "k", "v1", authority="executive", **loser_kw),
            A("F2", "k", "v2", scope="a"),
            who=actor(scope="a"),
            at=ts(5),
        )
        assert admitted_ids(res) == ["F2"]
        assert "outranked" not in codes(res, "F1") and "overridden" not in codes(res, "F1")

    def test_precedence_is_not_permanent(self) -> None:
        """A winner outranks only while it is a candidate: before and after its window the loser is admitted."""
        events = (
            A("F1", "k", "v1", authority="manager", valid_from=ts(10), valid_until=ts(20)),
            A("F2", "k", "v2", scope="a"),
        )
        who = actor(scope="a")
        assert [admitted_ids(run(*events, who=who, at=ts(m))) for m in (5, 15, 25)] == [
            ["F2"],
            ["F1"],
            ["F2"],
        ]

    def test_ties_are_all_admitted(self) -> None:
        """Candidates tying on authority and specificity are all admitted (same_key off)."""
        res = run(
            A("F1", "k", "v1"),
            A("F2", "k", "v2"),
            A("F3", "k", "v3", authority="subordinate"),
            policy=MULTIVALUE,
        )
        assert admitted_ids(res) == ["F1", "F2"]
        # the loser names one winner, the smallest id (linear output, SPEC §5)
        assert reason(res, "F3", "outranked") == (("e1",), ("F1",))

    def test_a_tie_loser_names_the_smallest_id_winner(self) -> None:
        """Not the first asserted: F9 comes first in the log, but F0 < F9."""
        res = run(
            A("F9", "k", "v1"),
            A("F0", "k", "v2"),
            A("F3", "k", "v3", authority="subordinate"),
            policy=MULTIVALUE,
        )
        assert admitted_ids(res) == ["F0", "F9"]
        assert reason(res, "F3", "outranked") == (("e2",), ("F0",))

    def test_precedence_is_per_key(self) -> None:
        """A higher-authority fact of another key outranks nothing."""
        assert admitted_ids(run(A("F1", "k", "v1", authority="policy"), A("F2", "j", "v2"))) == [
            "F1",
            "F2",
        ]


class TestDependencies:
    def test_dependency_invalidated(self) -> None:
        """A fact depending on a retracted fact is dependency_invalidated, naming it and the retract."""
        res = run(A("F1", "k", "v1"), R("F1"), A("F2", "j", "v2", depends_on=["F1"]))
        assert codes(res, "F2") == ("dependency_invalidated",)
        assert reason(res, "F2", "dependency_invalidated") == (("e2",), ("F1",))

    def test_chain_of_three_names_the_origin(self) -> None:
        """Transitively, each dependent names its direct dependency, the originating fact and the origin's events."""
        res = run(
            A("F1", "a", 1),
            A("F2", "b", 2, depends_on=["F1"]),
            A("F3", "c", 3, depends_on=["F2"]),
            A("F4", "d", 4, depends_on=["F3"]),
            R("F1"),
        )
        assert admitted_ids(res) == []
        assert reason(res, "F2", "dependency_invalidated") == (("e5",), ("F1",))
        assert reason(res, "F3", "dependency_invalidated") == (("e5",), ("F1", "F2"))
        assert reason(res, "F4", "dependency_invalidated") == (("e5",), ("F1", "F3"))

    @pytest.mark.parametrize(
        ("dep_kw", "extra", "code", "events"),
        [
            ({"status": "draft"}, (), "draft", ("e1",)),
            ({"valid_until": ts(2)}, (), "expired", ("e1",)),
            ({}, (A("F9", "a", "new"),), "superseded", ("e2",)),
            ({"scope": "a"}, (A("F9", "a", "specific", scope="a/b"),), "overridden", ("e2",)),
        ],
        ids=["draft", "expired", "superseded", "overridden"],
    )
    def test_every_validity_code_invalidates(
        self, dep_kw: dict[str, Any], extra: tuple[Any, ...], code: str, events: tuple[str, ...]
    ) -> None:
        """Any validity code of a dependency, substituting ones included, invalidates its dependents."""
        res = run(
            A("F1", "a", "old", **dep_kw),
            *extra,
            A("F2", "b", "x", depends_on=["F1"]),
            who=actor(scope="a/b"),
            at=ts(5),
        )
        assert codes(res, "F1") == (code,)
        assert reason(res, "F2", "dependency_invalidated") == (events, ("F1",))

    def test_dependency_restricted(self) -> None:
        """A fact depending on a hidden fact is dependency_restricted, transitively, naming the origin's events."""
        res = run(
            A("F1", "a", 1, visibility={"roles": ["hr"]}),
            G(fact="F1", to_actor="bob"),
            A("F2", "b", 2, depends_on=["F1"]),
            A("F3", "c", 3, depends_on=["F2"]),
        )
        assert codes(res, "F1") == ("access_denied",)
        assert reason(res, "F2", "dependency_restricted") == (("e1",), ("F1",))
        assert reason(res, "F3", "dependency_restricted") == (("e1",), ("F1", "F2"))

    def test_both_groups(self) -> None:
        """A fact depending on a withdrawn fact and on a hidden fact carries both dependency codes."""
        res = run(
            A("F1", "a", 1),
            R("F1"),
            A("F2", "b", 2, visibility={"actors": ["bob"]}),
            A("F3", "c", 3, depends_on=["F1", "F2"]),
        )
        assert codes(res, "F3") == ("dependency_invalidated", "dependency_restricted")
        assert reason(res, "F3", "dependency_invalidated") == (("e2",), ("F1",))
        assert reason(res, "F3", "dependency_restricted") == (("e3",), ("F2",))

    def test_admitted_dependency_is_fine(self) -> None:
        """Depending on an admitted fact excludes nothing and needs no recheck."""
        res = run(A("F1", "a", 1), A("F2", "b", 2, depends_on=["F1"]))
        assert admitted_ids(res) == ["F1", "F2"]
        assert not any(a.needs_recheck for a in res.admitted)

    def test_own_code_and_dependency_code_are_sorted(self) -> None:
        """A fact with its own code and a dependency code lists both, sorted by code."""
        res = run(
            A("F1", "a", 1),
            R("F1"),
            A("F2", "b", 2, depends_on=["F1"], valid_until=ts(4)),
            at=ts(5),
        )
        assert codes(res, "F2") == ("dependency_invalidated", "expired")


class TestFlagMode:
    def test_stale_dependent_is_admitted_with_recheck(self) -> None:
        """In flag mode a fact depending on a withdrawn fact is admitted with needs_recheck."""
        res = run(A("F1", "a", 1), R("F1"), A("F2", "b", 2, depends_on=["F1"]), policy=RECHECK)
        assert admitted_ids(res) == ["F2"]
        assert res.admitted[0].needs_recheck is True
        assert codes(res, "F1") == ("retracted",)

    def test_recheck_is_transitive(self) -> None:
        """A fact depending on a needs_recheck fact needs recheck too."""
        res = run(
            A("F1", "a", 1),
            A("F2", "b", 2, depends_on=["F1"]),
            A("F3", "c", 3, depends_on=["F2"]),
            R("F1"),
            policy=RECHECK,
        )
        assert admitted_ids(res) == ["F2", "F3"]
        assert [a.needs_recheck for a in res.admitted] == [True, True]

    def test_fresh_facts_need_no_recheck(self) -> None:
        """In flag mode an admitted fact with valid inputs is not flagged."""
        res = run(A("F1", "a", 1), A("F2", "b", 2, depends_on=["F1"]), policy=RECHECK)
        assert [a.needs_recheck for a in res.admitted] == [False, False]

    def test_own_code_still_excludes(self) -> None:
        """A stale dependent with its own exclusion code stays excluded, without a dependency code."""
        res = run(
            A("F1", "a", 1),
            R("F1"),
            A("F2", "b", 2, depends_on=["F1"], status="draft"),
            policy=RECHECK,
        )
        assert codes(res, "F2") == ("draft",)

    def test_restricted_is_never_just_a_flag(self) -> None:
        """In flag mode a dependency hidden from A still excludes with dependency_restricted."""
        res = run(
            A("F1", "a", 1, visibility={"roles": ["hr"]}),
            A("F2", "b", 2, depends_on=["F1"]),
            policy=RECHECK,
        )
        assert codes(res, "F2") == ("dependency_restricted",)

    def test_exclude_mode_is_the_default(self) -> None:
        """The same log under the default policy excludes the stale dependent."""
        res = run(A("F1", "a", 1), R("F1"), A("F2", "b", 2, depends_on=["F1"]))
        assert codes(res, "F2") == ("dependency_invalidated",)


class TestIgnored:
    def test_every_kind_of_ineffective_event(self) -> None:
        """Retract, promote, grant and revoke below their target's authority are each listed, sorted by event."""
        res = run(
            A("F1", "k", 1, authority="executive", visibility={"roles": ["hr"]}),
            A("F2", "j", 2, authority="executive", status="draft"),
            R("F1", authority="manager"),
            P("F2", authority="manager"),
            G(fact="F1", to_actor="alice", authority="manager"),
            V(fact="F1", role="hr", authority="system"),
        )
        assert [(i.event, i.code, i.fact) for i in res.ignored] == [
            ("e3", IA, "F1"),
            ("e4", IA, "F2"),
            ("e5", IA, "F1"),
            ("e6", IA, "F1"),
        ]
        assert codes(res, "F1") == ("access_denied",)
        assert codes(res, "F2") == ("draft",)

    def test_ignored_sorted_by_code_point(self) -> None:
        """ignored is sorted by event id in code-point order (e10 before e9)."""
        events = [A("F1", "k", 1, authority="policy")] + [
            R("F1", authority="peer") for _ in range(10)
        ]
        res = run(*events)
        assert [i.event for i in res.ignored] == sorted(f"e{n}" for n in range(2, 12))

    def test_ignored_after_t_is_not_listed(self) -> None:
        """An ineffective event stamped after t is not listed."""
        res = run(A("F1", "k", 1, authority="manager"), R("F1", authority="peer"), at=ts(1.5))
        assert res.ignored == ()


class TestTimeCut:
    EVENTS = (
        A("F1", "k", "v1"),
        A("F2", "j", "v2", visibility={"roles": ["hr"]}),
        X("X1", ["F1"]),
    )
    LATER = (
        A("F3", "k", "v3", authority="executive"),
        R("F1"),
        G(fact="F2", to_actor="alice"),
        A("G1", "k", "v", tenant="globex"),
        X("X2", ["F1"]),
    )

    def test_events_after_t_change_nothing(self) -> None:
        """Only events with ts <= t count: appending later events leaves Γ at t byte-identical."""
        at = ts(3)
        before = run(*self.EVENTS, at=at)
        after = run(*self.EVENTS, *self.LATER, at=at)
        assert after.to_json() == before.to_json()

    def test_fact_after_t_is_not_listed(self) -> None:
        """A fact asserted after t is neither admitted nor excluded."""
        res = run(*self.EVENTS, *self.LATER, at=ts(3))
        assert sorted(admitted_ids(res) + excluded_ids(res)) == ["F1", "F2"]
        assert [v.experience for v in res.experiences] == ["X1"]

    def test_event_at_t_counts(self) -> None:
        """An event stamped exactly at t is part of H_t."""
        assert codes(run(A("F1", "k", 1), R("F1"), at=ts(2)), "F1") == ("retracted",)

    def test_log_head_is_the_chain_at_t(self) -> None:
        """log is the sha256 chain over the canonical events with ts <= t, other tenants included."""
        raw = stamp([A("F1", "k", 1), A("G1", "k", 2, tenant="globex"), A("F2", "j", 3)])
        head = bytes(32)
        for body in raw[:2]:
            canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            head = hashlib.sha256(head + canonical.encode("utf-8")).digest()
        res = run(*[{k: v for k, v in e.items()} for e in raw], at=ts(2))
        assert res.log == head.hex()

    def test_empty_prefix(self) -> None:
        """Before the first event nothing is known and the head is 64 zeros."""
        res = run(A("F1", "k", 1), at=ts(0))
        assert (res.admitted, res.excluded, res.experiences, res.ignored) == ((), (), (), ())
        assert res.log == "0" * 64


def check_invariants(res: Resolution, events: tuple[Event, ...], at: datetime) -> None:
    """Every fact of the actor's tenant in H_t is admitted or excluded, exactly once; every reason points at real events and facts of that tenant."""
    cut = [e for e in events if e.ts <= at and e.tenant == res.actor.tenant]
    event_ids = {e.id for e in cut}
    fact_ids = {e.fact for e in cut if isinstance(e, Assert)}
    admitted = [a.fact for a in res.admitted]
    excluded = [x.fact for x in res.excluded]
    assert sorted(admitted + excluded) == sorted(fact_ids)
    assert not set(admitted) & set(excluded)
    assert admitted == sorted(admitted) and excluded == sorted(excluded)
    for item in res.excluded:
        assert item.reasons, item
        assert list(item.codes) == sorted(set(item.codes))
        for r in item.reasons:
            assert r.code in REASON_CODES
            assert r.events and set(r.events) <= event_ids, (item.fact, r)
            assert set(r.facts) <= fact_ids, (item.fact, r)
            assert list(r.events) == sorted(r.events) and list(r.facts) == sorted(r.facts)
    for v in res.experiences:
        for used in v.reasons:
            assert set(used.events) <= event_ids
        assert set(dict(v.bindings).values()) <= set(admitted)
    for i in res.ignored:
        assert i.event in event_ids and i.fact in fact_ids
    body = res.to_dict()
    for item in body["excluded"]:
        assert "value" not in item


ACME = ROOT / "fixtures" / "examples" / "acme.jsonl"
ACTORS = {
    "alice": {
        "id": "alice",
        "tenant": "acme",
        "roles": ["sales"],
        "clearance": "internal",
        "scope": "helios/launch",
    },
    "hr": {"id": "henry", "tenant": "acme", "roles": ["hr", "legal"], "clearance": "secret"},
    "globex": {"id": "gina", "tenant": "globex"},
}


class TestInvariants:
    @pytest.mark.parametrize("who", sorted(ACTORS))
    @pytest.mark.parametrize(
        "at",
        [
            "2026-03-01T09:00:00Z",
            "2026-03-01T09:14:30Z",
            "2026-03-01T09:25:30Z",
            "2026-03-02T10:00:00Z",
            "2026-05-01T00:00:00Z",
        ],
    )
    def test_acme_fixture(self, who: str, at: str) -> None:
        """On the example log, at several times and for several actors, every reason is well-formed."""
        events = load_events(ACME)
        res = resolve(events, parse_actor(ACTORS[who]), at)
        check_invariants(res, events, parse_ts(at))

    def test_several_codes_sorted(self) -> None:
        """A fact carrying several codes lists each once, sorted (draft, expired, retracted)."""
        res = run(A("F1", "k", 1, status="draft", valid_until=ts(3)), R("F1"), at=ts(4))
        assert codes(res, "F1") == ("draft", "expired", "retracted")
        assert reason(res, "F1", "retracted") == (("e2",), ())

    def test_facts_sorted_by_code_point(self) -> None:
        """admitted and excluded are sorted by fact id in code-point order (F10 before F2)."""
        res = run(
            *[
                A(f"F{n}", f"k{n}", n, status="draft" if n % 2 else "committed")
                for n in range(1, 12)
            ]
        )
        assert admitted_ids(res) == ["F10", "F2", "F4", "F6", "F8"]
        assert excluded_ids(res) == ["F1", "F11", "F3", "F5", "F7", "F9"]


class TestAdmittedRecord:
    def test_defaults_are_filled(self) -> None:
        """Admitted facts carry scope, authority, kind and priority with defaults filled in."""
        res = run(A("F1", "k", 1))
        assert res.to_dict()["admitted"] == [
            {
                "fact": "F1",
                "key": "k",
                "value": 1,
                "scope": "global",
                "authority": "peer",
                "kind": "fact",
                "priority": "hard",
                "needs_recheck": False,
            }
        ]

    def test_authority_default_comes_from_policy(self) -> None:
        """An unwritten authority is reported as the policy's default."""
        policy = load_policy(ROOT / "policies" / "strict.toml")
        assert run(A("F1", "k", 1), policy=policy).admitted[0].authority == "unverified"

    def test_actor_is_echoed_normalised(self) -> None:
        """The resolution echoes the actor with roles sorted and de-duplicated and defaults filled."""
        res = resolve(
            log(A("F1", "k", 1)), {"id": "a", "tenant": "acme", "roles": ["z", "b", "z"]}, AT
        )
        assert res.to_dict()["actor"] == {
            "id": "a",
            "tenant": "acme",
            "roles": ["b", "z"],
            "clearance": "public",
            "scope": "global",
        }


class TestDeterminism:
    def sample(self) -> Resolution:
        events = load_events(ACME)
        return resolve(events, parse_actor(ACTORS["alice"]), "2026-03-02T10:00:00Z")

    def test_to_json_is_stable(self) -> None:
        """Two resolutions of the same inputs give the same bytes."""
        assert self.sample().to_json() == self.sample().to_json()

    def test_to_json_is_canonical(self) -> None:
        """to_json is sorted-key, compact, UTF-8 JSON: json.dumps(sort_keys, separators) of itself."""
        text = self.sample().to_json()
        assert text == json.dumps(
            json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        assert "\n" not in text

    def test_digest_is_sha256_of_body_without_digest(self) -> None:
        """digest is the sha256 hex of the canonical JSON of the object without digest, engine
        and format (those name the writer and the format; they decide nothing)."""
        res = self.sample()
        body = json.loads(res.to_json())
        digest = body.pop("digest")
        assert (body.pop("engine"), body.pop("format")) == (__version__, 1)
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert digest == res.digest == hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def test_top_level_fields(self) -> None:
        """The record has exactly the nine fields of DESIGN §6, ``tree`` (the Merkle head), and
        ``engine`` and ``format`` (who wrote it, in which format: issue 32)."""
        assert sorted(json.loads(self.sample().to_json())) == [
            "actor",
            "admitted",
            "at",
            "digest",
            "engine",
            "excluded",
            "experiences",
            "format",
            "ignored",
            "log",
            "policy",
            "tree",
        ]

    def test_round_trip(self) -> None:
        """Resolution.from_dict(json.loads(r.to_json())) == r, and it re-serialises to the same bytes."""
        res = self.sample()
        again = Resolution.from_dict(json.loads(res.to_json()))
        assert again == res
        assert again.to_json() == res.to_json()

    def test_digest_changes_with_content(self) -> None:
        """A different resolution time that changes the outcome gives a different digest."""
        events = load_events(ACME)
        who = parse_actor(ACTORS["alice"])
        assert (
            resolve(events, who, "2026-03-01T09:30:00Z").digest
            != resolve(events, who, "2026-03-02T10:00:00Z").digest
        )

    def test_at_is_printed_in_utc(self) -> None:
        """at is echoed in UTC, whatever offset it was given with."""
        res = run(A("F1", "k", 1), at="2026-03-02T01:00:00+01:00")
        assert res.to_dict()["at"] == AT

    def test_policy_object_and_default_agree(self) -> None:
        """Passing the default policy explicitly gives the same bytes as passing none."""
        events = log(A("F1", "k", 1))
        assert (
            resolve(events, actor(), AT).to_json()
            == resolve(events, actor(), AT, DEFAULT_POLICY).to_json()
        )


class TestFailClosed:
    """Issue 11: what the attack run found, each shape pinned."""

    def test_out_of_scope_dependency_restricts_its_dependent(self) -> None:
        """An HR-scoped severance is out_of_scope for sales; a bonus derived from it is restricted."""
        res = run(
            A("F1", "severance", "$40,000", scope="hr"),
            A("F2", "bonus_pool", "$8,000 (20% of the $40,000 severance)", depends_on=["F1"]),
            who=actor(scope="sales"),
        )
        assert codes(res, "F2") == ("dependency_restricted",)
        assert reason(res, "F2", "dependency_restricted") == (("e1",), ("F1",))

    def test_validity_reaches_through_a_hidden_fact_in_exclude_and_flag_mode(self) -> None:
        """D expired <- G out_of_scope <- F: F is never admitted clean, in either mode."""
        events = (
            A("D", "d", 1, valid_until=ts(2)),
            A("G", "g", 2, scope="hr", depends_on=["D"]),
            A("F", "f", 3, depends_on=["G"]),
        )
        for policy in (DEFAULT_POLICY, RECHECK):
            res = run(*events, who=actor(scope="sales", policy=policy), policy=policy)
            assert "F" not in admitted_ids(res)
            assert "dependency_restricted" in codes(res, "F")
        res = run(*events, who=actor(scope="sales"))
        assert reason(res, "F", "dependency_invalidated") == (("e1",), ("D", "G"))

    def test_flag_mode_recheck_names_the_origin_through_an_admitted_recheck_link(self) -> None:
        """D expired <- G (needs recheck) <- F: F needs recheck, its input the origin D."""
        res = run(
            A("D", "d", 1, valid_until=ts(2)),
            A("G", "g", 2, depends_on=["D"]),
            A("F", "f", 3, depends_on=["G"]),
            policy=RECHECK,
        )
        assert {a.fact: a.needs_recheck for a in res.admitted} == {"F": True, "G": True}
        assert dict(res.recheck_inputs) == {"F": ("D",), "G": ("D",)}

    def test_key_grant_never_reveals_a_fact_restricted_to_named_actors(self) -> None:
        """A key grant made before the fact exists does not reveal a fact listing `actors`."""
        res = run(
            G(key="k", to_actor="alice"),
            A("F1", "k", "secret", visibility={"actors": ["bob"]}),
            A("F2", "j", "open to the role", visibility={"roles": ["hr"]}),
            G(key="j", to_actor="alice"),
        )
        assert codes(res, "F1") == ("access_denied",)
        assert admitted_ids(res) == ["F2"]

    def test_fact_revoke_ends_a_key_grant_for_that_fact(self) -> None:
        """A revoke by fact ends every grant reaching that fact for that grantee."""
        res = run(
            A("F1", "k", "v1", visibility={"roles": ["hr"]}),
            A("F2", "k", "v2", visibility={"roles": ["hr"]}, scope="x"),
            G(key="k", to_actor="alice"),
            V(fact="F1", to_actor="alice"),
            who=actor(scope="x"),
        )
        assert codes(res, "F1") == ("access_denied", "overridden")
        assert reason(res, "F1", "access_denied") == (("e1", "e4"), ())
        assert admitted_ids(res) == ["F2"]

    def test_a_later_key_grant_grants_again_after_a_fact_revoke(self) -> None:
        res = run(
            A("F1", "k", "v1", visibility={"roles": ["hr"]}),
            G(fact="F1", to_actor="alice"),
            V(fact="F1", to_actor="alice"),
            G(key="k", to_actor="alice"),
        )
        assert admitted_ids(res) == ["F1"]

    def test_access_denied_names_only_the_last_revoke(self) -> None:
        """Toggling a grant 3 times names the assert and the revoke now in force, not every toggle."""
        toggles = [G(key="k", role="r"), V(key="k", role="r")] * 3
        res = run(A("F1", "k", "v", visibility={"roles": ["hr"]}), *toggles, who=actor(roles=["r"]))
        assert reason(res, "F1", "access_denied") == (("e1", "e7"), ())

    def test_an_ineffective_key_grant_is_listed_once(self) -> None:
        """A key grant below the authority of three facts is one ignored entry (the smallest fact id)."""
        res = run(
            A("F3", "k", 1, authority="executive", scope="a"),
            A("F1", "k", 2, authority="executive", scope="b"),
            A("F2", "k", 3, authority="executive", scope="c"),
            G(key="k", to_actor="alice", authority="peer"),
        )
        assert ignored_set(res) == {("e4", IA, "F1")}

    def test_running_balance_reasons_name_the_link_below(self) -> None:
        """Each total depends on and supersedes the previous: a reason names one link, not the chain."""
        events = [A("B0", "balance", 0)]
        for i in range(1, 30):
            events.append(A(f"B{i}", "balance", i, depends_on=[f"B{i - 1}"], supersedes=[f"B{i - 1}"]))
        res = run(*events)
        assert admitted_ids(res) == []  # every total depends on a superseded one
        assert reason(res, "B28", "dependency_invalidated") == (("e29",), ("B27",))
        assert reason(res, "B29", "dependency_invalidated") == (("e30",), ("B28",))

    def test_actor_object_with_unsorted_roles_and_no_clearance(self) -> None:
        """A hand-built Actor: roles sorted and de-duplicated, clearance the policy default."""
        policy = attrs.evolve(DEFAULT_POLICY, clearance_default="internal")
        who = Actor(id="alice", tenant="acme", roles=("sales", "hr", "sales"), clearance=None)
        res = run(
            A("F1", "k", "v", visibility={"roles": ["hr"], "clearance": "internal"}),
            who=who,
            policy=policy,
        )
        assert res.actor.roles == ("hr", "sales")
        assert res.actor.clearance == "internal"
        assert admitted_ids(res) == ["F1"]


class TestPythonCallersGetGammaErrors:
    """SPEC §2: from Python, a bad time or render format is a gamma.InputError naming the field."""

    @pytest.mark.parametrize("at", ["2026-03-02", datetime(2026, 3, 2, 10)])
    def test_bad_at(self, at: object) -> None:
        """A date without a time or a naive datetime is an input error on ``at``."""
        with pytest.raises(InputError) as caught:
            resolve(log(A("F1", "k", "v")), actor(), at)  # type: ignore[arg-type]
        assert caught.value.field == "at"

    @pytest.mark.parametrize("at", [20260302, None])
    def test_wrong_type_of_at(self, at: object) -> None:
        """Neither a string nor a datetime: a TypeError naming ``at`` (issue 26 part 7)."""
        with pytest.raises(TypeError, match=r"resolve\(\): at must be"):
            resolve(log(A("F1", "k", "v")), actor(), at)  # type: ignore[arg-type]

    def test_aware_datetime_and_string_agree(self) -> None:
        """An aware datetime and its RFC 3339 string are the same instant, the same bytes."""
        events = log(A("F1", "k", "v"))
        aware = datetime(2026, 3, 2, 10, tzinfo=UTC)
        assert resolve(events, actor(), aware).to_json() == resolve(events, actor(), "2026-03-02T10:00:00Z").to_json()

    def test_unknown_render_format(self) -> None:
        """An unknown format is an input error on ``format``, not a bare ValueError."""
        with pytest.raises(InputError) as caught:
            resolve(log(A("F1", "k", "v")), actor(), AT).render("yaml")
        assert caught.value.field == "format"


class TestHandBuiltEvents:
    """SPEC §2: ``resolve`` validates events it did not read itself, by the reader's rules."""

    T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)

    def made(self, event_id: str, fact: str, value: Any = "v", **kw: Any) -> Assert:
        return Assert(id=event_id, ts=self.T0, actor="w", tenant="acme", fact=fact, key="k",
                      value=value, **kw)

    def test_retract_of_an_unknown_fact(self) -> None:
        """A hand-built Retract of a fact never asserted is an input error naming it, not KeyError."""
        events = [self.made("e1", "F1"), Retract(id="e2", ts=self.T0, actor="w", tenant="acme", fact="F9")]
        with pytest.raises(UnknownReferenceError) as caught:
            resolve(events, actor(), AT)
        assert caught.value.field == "fact" and "events[1]" in str(caught.value) and "'e2'" in str(caught.value)

    def test_two_asserts_of_one_fact(self) -> None:
        """Two hand-built Asserts with one fact id are refused, not both admitted."""
        with pytest.raises(DuplicateIdError) as caught:
            resolve([self.made("e1", "F1"), self.made("e2", "F1", "w")], actor(), AT)
        assert caught.value.field == "fact" and "events[1]" in str(caught.value)

    @pytest.mark.parametrize(
        ("make", "field"),
        [
            (lambda t: Assert(id="e1", ts=t.replace(tzinfo=None), actor="w", tenant="acme", fact="F1",
                              key="k", value="v"), "ts"),
            (lambda t: Assert(id="e1", ts=t, actor="w", tenant="acme", fact="F1", key="k", value=1.5), "value"),
            (lambda t: Assert(id="e1", ts=t, actor="w", tenant="acme", fact="F1", key="k", value=2**60), "value"),
            (lambda t: Assert(id="e1", ts=t, actor="w", tenant="acme", fact="F1", key="k", value=10**5000), "value"),
            (lambda t: Assert(id="e\r1", ts=t, actor="w", tenant="acme", fact="F1", key="k", value="v"), "id"),
            (lambda t: Assert(id="e1", ts=t, actor="w", tenant="acme", fact="F1", key="k", value="v",
                              authority="chief"), "authority"),
            (lambda t: Assert(id="e1", ts=t, actor="w", tenant="acme", fact="F1", key="k", value="v",
                              scope="a//b"), "scope"),
        ],
    )
    def test_bad_field(self, make: Any, field: str) -> None:
        """What the reader refuses in a line is refused in an object, naming the same field."""
        with pytest.raises(InputError) as caught:
            resolve([make(self.T0)], actor(), AT)
        assert caught.value.field == field and "events[0] (id" in str(caught.value)

    def test_not_an_event(self) -> None:
        with pytest.raises(TypeError, match=r"resolve\(\): events must be"):
            resolve([{"type": "assert"}], actor(), AT)  # type: ignore[list-item]

    def test_ts_going_backwards(self) -> None:
        """A joined log whose ts goes backwards is refused (Γ would cut the wrong prefix)."""
        later = attrs.evolve(self.made("e1", "F1"), ts=datetime(2026, 3, 1, 10, tzinfo=UTC))
        with pytest.raises(InputError) as caught:
            resolve([later, self.made("e2", "F2")], actor(), AT)
        assert caught.value.field == "ts"

    def test_valid_hand_built_log_resolves_as_its_text(self) -> None:
        """A valid hand-built log gives the bytes its JSONL text gives."""
        built = [self.made("e1", "F1"), Retract(id="e2", ts=self.T0, actor="w", tenant="acme", fact="F1"),
                 self.made("e3", "F2", 7)]
        text = "\n".join(canonical_event(e) for e in built)
        parsed = parse_events(text.split("\n"))
        assert resolve(built, actor(), AT).to_json() == resolve(parsed, actor(), AT).to_json()

    def test_a_cut_log_is_checked(self) -> None:
        """A log with its assert cut out (a plain tuple, not the reader's output) is refused."""
        events = log(A("F1", "k", "v"), R("F1"))
        assert isinstance(events, ParsedLog) and isinstance(events[:1], ParsedLog)
        with pytest.raises(UnknownReferenceError):
            resolve(events[1:], actor(), AT)

    def test_parsed_log_is_not_validated_again(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The reader's output (and its prefixes) go to Γ as they are: no second parse."""
        events = log(A("F1", "k", "v"), A("F2", "k2", "w"))
        monkeypatch.setattr(handbuilt, "read_lines", None)  # any call would raise TypeError
        assert admitted_ids(resolve(events, actor(), AT)) == ["F1", "F2"]
        assert admitted_ids(resolve(events[:1], actor(), AT)) == ["F1"]


class TestRecordedHeads:
    """SPEC §3: a resolution's ``log`` and ``tree`` are those of the prefix it resolved."""

    def test_a_given_head_or_tree_is_checked(self) -> None:
        events = log(A("F1", "k", "v"), A("F2", "k2", "w", ts="2026-03-05T09:00:00Z"))
        own = resolve(events, actor(), "2026-03-02T00:00:00Z")  # hears only F1
        assert own.tree.size == 1
        again = resolve(events, actor(), "2026-03-02T00:00:00Z", head=own.log, tree=own.tree)
        assert again.to_json() == own.to_json()
        whole = resolve(events, actor(), "2026-03-06T00:00:00Z")
        with pytest.raises(InputError) as caught:  # the whole log's head, for a prefix of one event
            resolve(events, actor(), "2026-03-02T00:00:00Z", head=whole.log)
        assert caught.value.field == "head"
        with pytest.raises(InputError) as caught:
            resolve(events, actor(), "2026-03-02T00:00:00Z", tree=whole.tree)
        assert caught.value.field == "tree"

    def test_a_partition_records_the_whole_logs_heads(self) -> None:
        """resolve_partition: one tenant's part under the whole log's heads (gamma.review)."""
        events = log(A("F1", "k", "v"), A("F2", "k", "w", tenant="other"))
        whole = resolve(events, actor(), AT)
        # one tenant's events of a valid log are a valid log (references stay in a tenant)
        part = ParsedLog(e for e in events if e.tenant == "acme")
        with pytest.raises(InputError):
            resolve(part, actor(), AT, head=whole.log, tree=whole.tree)
        got = resolve_partition(part, actor(), AT, head=whole.log, tree=whole.tree)
        assert got.to_json() == whole.to_json()


class TestLowestLevelUnderStrict:
    """SPEC §1: equal rank acts, so under strict an unlisted writer's grant reveals an unattributed
    fact of an unlisted writer, and nothing a listed writer asserted with its authority."""

    STRICT = load_policy(ROOT / "policies" / "strict.toml")

    def test_the_lowest_level_governs_its_own_facts_only(self) -> None:
        res = run(
            A("F1", "note", "bot's", actor="mallory", visibility={"roles": ["hr"]}),
            A("F2", "salary", "$9", actor="hr-ann", authority="manager", visibility={"roles": ["hr"]}),
            G(fact="F1", to_actor="alice", actor="eve"),
            G(fact="F2", to_actor="alice", actor="eve"),
            policy=self.STRICT,
        )
        assert admitted_ids(res) == ["F1"]
        assert codes(res, "F2") == ("access_denied",)
        assert ("e4", IA, "F2") in ignored_set(res)


@pytest.mark.parametrize("size", [0, 1, 255, 256, 257, 600])
def test_a_list_encoded_in_chunks_is_the_list_encoded_at_once(size: int) -> None:
    """Encoding a resolution's records a chunk at a time changes no byte of the JSON."""
    from gamma.core.terms.canonical import CHUNK, canonical_list, canonical_text, compact_json

    assert CHUNK == 256
    items = [{"fact": f"F{i}", "events": ("e\u00e9", f"e{i}"), "n": i} for i in range(size)]
    encoded = canonical_list(items, dict).decode("utf-8")
    assert encoded == canonical_text(items) == compact_json(items)


def test_the_json_of_a_resolution_is_the_compact_json_of_its_dict() -> None:
    """to_json encodes its records apart from to_dict's lists: the same bytes all the same
    (600 facts of 7 keys: most excluded, more than two chunks)."""
    from gamma.core.terms.canonical import compact_json

    lines = [
        json.dumps(
            {
                "id": f"e{i}",
                "type": "assert",
                "ts": f"2026-03-01T09:{i // 60:02d}:{i % 60:02d}Z",
                "actor": "w",
                "tenant": "acme",
                "fact": f"F{i}",
                "key": f"k{i % 7}",
                "value": i,
            }
        )
        for i in range(600)
    ]
    resolution = resolve(
        parse_events(lines), {"id": "alice", "tenant": "acme"}, "2026-03-02T00:00:00Z"
    )
    assert len(resolution.excluded) > 512
    assert resolution.to_json() == compact_json(resolution.to_dict())
