"""Governance policies: loading, validation and the digest (DESIGN §4)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import AT, A, G, P, R, V, actor, log, run

from gamma import (
    DEFAULT_POLICY,
    Policy,
    PolicyError,
    ValueTypeError,
    load_policy,
    parse_policy,
    resolve,
)

POLICIES = Path(__file__).resolve().parent.parent / "policies"


def independent_digest(policy: Policy) -> str:
    """sha256 of the canonical JSON of the normalised policy, computed without gamma's helpers."""
    body = {
        "authority": {"ladder": list(policy.authority_ladder), "default": policy.authority_default},
        "clearance": {"ladder": list(policy.clearance_ladder), "default": policy.clearance_default},
        "supersession": {"same_key": policy.same_key},
        "dependencies": {"mode": policy.dependency_mode},
        "disclosure": {"restricted_keys": policy.restricted_keys},
    }
    if policy.writer_default is not None:
        body["authority"]["writer_default"] = policy.writer_default
    if policy.over_claim != "cap":
        body["authority"]["over_claim"] = policy.over_claim
    if policy.writers:
        body["writers"] = dict(policy.writers)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TestDefault:
    def test_default_file_digest_equals_builtin(self) -> None:
        """policies/default.toml and the built-in default have the same digest."""
        assert load_policy(POLICIES / "default.toml").digest == DEFAULT_POLICY.digest

    def test_default_file_equals_builtin(self) -> None:
        """policies/default.toml normalises to exactly the built-in default."""
        assert load_policy(POLICIES / "default.toml") == DEFAULT_POLICY

    def test_empty_file_is_the_default(self) -> None:
        """Every key is optional: an empty policy is the default, digest included."""
        assert parse_policy("").digest == DEFAULT_POLICY.digest

    def test_builtin_values(self) -> None:
        """The built-in default holds the ladders, defaults and switches DESIGN §4 lists."""
        p = DEFAULT_POLICY
        assert p.authority_ladder == (
            "unverified",
            "system",
            "subordinate",
            "peer",
            "manager",
            "executive",
            "policy",
        )
        assert (p.authority_default, p.clearance_default) == ("peer", "public")
        assert p.clearance_ladder == ("public", "internal", "confidential", "secret")
        assert (p.same_key, p.dependency_mode, p.restricted_keys) == (True, "exclude", False)

    @pytest.mark.parametrize("name", ["default", "strict", "recheck", "multivalue"])
    def test_digest_is_sha256_of_canonical_json(self, name: str) -> None:
        """The digest is the sha256 hex of the canonical JSON of the normalised policy."""
        policy = load_policy(POLICIES / f"{name}.toml")
        assert policy.digest == independent_digest(policy)
        assert len(policy.digest) == 64 and policy.digest == policy.digest.lower()

    def test_equivalent_text_has_the_same_digest(self) -> None:
        """Comments, key order and table order do not change the digest."""
        a = parse_policy('[dependencies]\nmode = "flag"\n[supersession]\nsame_key = false\n')
        b = parse_policy('# x\n[supersession]\nsame_key=false # y\n\n[dependencies]\nmode="flag"\n')
        assert a.digest == b.digest
        assert a.digest != DEFAULT_POLICY.digest


class TestShippedPolicies:
    def test_strict(self) -> None:
        """strict.toml: unattributed writes are unverified; stale dependents excluded; nothing disclosed."""
        p = load_policy(POLICIES / "strict.toml")
        assert (p.authority_default, p.dependency_mode, p.restricted_keys) == (
            "unverified",
            "exclude",
            False,
        )

    def test_recheck(self) -> None:
        """recheck.toml: flag mode and restricted keys disclosed."""
        p = load_policy(POLICIES / "recheck.toml")
        assert (p.dependency_mode, p.restricted_keys, p.same_key) == ("flag", True, True)

    def test_multivalue(self) -> None:
        """multivalue.toml: same-key supersession off, everything else default."""
        p = load_policy(POLICIES / "multivalue.toml")
        assert p.same_key is False
        assert p.authority_ladder == DEFAULT_POLICY.authority_ladder

    def test_shipped_digests_are_distinct(self) -> None:
        """Each shipped non-default policy has its own digest."""
        digests = {
            load_policy(POLICIES / f"{n}.toml").digest
            for n in ("default", "strict", "recheck", "multivalue")
        }
        assert len(digests) == 4

    def test_strict_unattributed_write_cannot_supersede(self) -> None:
        """Under strict, an assert without authority is unverified and cannot supersede an attributed fact."""
        strict = load_policy(POLICIES / "strict.toml")
        res = run(
            A("F1", "k", "v1", authority="peer", actor="hr-lead"), A("F2", "k", "v2"), policy=strict
        )
        assert [a.fact for a in res.admitted] == ["F1"]
        assert res.excluded_fact("F2").codes == ("outranked",)  # type: ignore[union-attr]
        assert res.admitted[0].authority == "peer"


class TestErrors:
    def check(self, text: str, field: str | None, line: int | None) -> PolicyError:
        with pytest.raises(PolicyError) as info:
            parse_policy(text, source="p.toml")
        assert info.value.field == field, str(info.value)
        assert info.value.line == line, str(info.value)
        assert info.value.source == "p.toml"
        assert isinstance(info.value, ValueError)
        return info.value

    def test_unknown_table(self) -> None:
        """An unknown table is refused, naming it and its line."""
        self.check('\n[colour]\nshade = "red"\n', "colour", 2)

    def test_unknown_top_level_key(self) -> None:
        """A key outside any table is refused, naming it and its line."""
        self.check('# policy\nshade = "red"\n', "shade", 2)

    def test_unknown_key(self) -> None:
        """An unknown key in a known table is refused as table.key."""
        self.check('[authority]\ndefault = "peer"\nlevels = 3\n', "authority.levels", 3)

    @pytest.mark.parametrize(
        ("text", "field"),
        [
            ('[supersession]\nsame_key = "yes"\n', "supersession.same_key"),
            ("[supersession]\nsame_key = 1\n", "supersession.same_key"),
            ("[disclosure]\nrestricted_keys = 0\n", "disclosure.restricted_keys"),
            ("[authority]\ndefault = true\n", "authority.default"),
            ('[authority]\nladder = "peer"\n', "authority.ladder"),
            ('[clearance]\nladder = ["public", 2]\n', "clearance.ladder"),
        ],
        ids=[
            "string-for-bool",
            "int-for-bool",
            "int-for-bool-2",
            "bool-for-string",
            "string-for-list",
            "int-in-ladder",
        ],
    )
    def test_wrong_type(self, text: str, field: str) -> None:
        """A value of the wrong TOML type is refused on its key and line."""
        self.check(text, field, 2)

    def test_authority_default_not_on_ladder(self) -> None:
        """An authority default that is not on the authority ladder is refused."""
        self.check(
            '[authority]\nladder = ["low", "high"]\ndefault = "peer"\n', "authority.default", 3
        )

    def test_clearance_default_not_on_ladder(self) -> None:
        """A clearance default that is not on the clearance ladder is refused."""
        self.check('\n\n[clearance]\ndefault = "ultra"\n', "clearance.default", 4)

    def test_duplicate_ladder_level(self) -> None:
        """A ladder listing a level twice is refused."""
        self.check('[authority]\nladder = ["a", "b", "a"]\ndefault = "a"\n', "authority.ladder", 2)

    def test_empty_ladder(self) -> None:
        """A ladder with no level is refused."""
        self.check("[clearance]\nladder = []\n", "clearance.ladder", 2)

    def test_unknown_dependency_mode(self) -> None:
        """A dependency mode other than exclude or flag is refused."""
        self.check('[dependencies]\nmode = "eager"\n', "dependencies.mode", 2)

    def test_invalid_toml(self) -> None:
        """TOML that does not parse is refused with its line."""
        self.check('[authority]\ndefault = "peer\n', None, 2)

    def test_missing_file(self, tmp_path: Path) -> None:
        """A policy file that cannot be read is a PolicyError naming it."""
        with pytest.raises(PolicyError) as info:
            load_policy(tmp_path / "nope.toml")
        assert info.value.source == str(tmp_path / "nope.toml")


class TestInOutput:
    def test_resolution_names_the_policy_digest(self) -> None:
        """A resolution records the digest of the policy it was computed under."""
        strict = load_policy(POLICIES / "strict.toml")
        events = log(A("F1", "k", "v"))
        assert resolve(events, actor(), AT).policy == DEFAULT_POLICY.digest
        res = resolve(events, actor(policy=strict), AT, strict)
        assert res.policy == strict.digest
        assert json.loads(res.to_json())["policy"] == strict.digest

    def test_custom_ladders_drive_resolution(self) -> None:
        """Ranks come from the policy's ladder: a custom top level outranks its default."""
        policy = parse_policy('[authority]\nladder = ["clerk", "chief"]\ndefault = "clerk"\n')
        res = run(A("F1", "k", "v1", authority="chief"), A("F2", "k", "v2"), policy=policy)
        assert [a.fact for a in res.admitted] == ["F1"]
        assert res.admitted[0].authority == "chief"
        assert res.excluded_fact("F2").codes == ("outranked",)  # type: ignore[union-attr]


# -- writers' authority (issue 11) -------------------------------------------------------

WRITERS = """
[authority]
{extra}

[writers]
"exec" = "executive"
"hr-*" = "manager"
"hr-intern" = "subordinate"
"""


def writers_policy(extra: str = "") -> Policy:
    return parse_policy(WRITERS.format(extra=extra))


class TestWriters:
    def test_entries_and_default(self) -> None:
        """Exact ids and '*' prefixes; the highest matching entry wins; unlisted writers hold
        writer_default (by default the top of the ladder: claims are trusted)."""
        p = writers_policy()
        ladder = p.authority_ladder
        assert ladder[p.writer_rank("exec")] == "executive"
        assert ladder[p.writer_rank("hr-bob")] == "manager"
        assert ladder[p.writer_rank("hr-intern")] == "manager"  # "hr-*" also matches
        assert ladder[p.writer_rank("execs")] == "policy"  # not a prefix entry
        low = writers_policy('writer_default = "system"')
        assert ladder[low.writer_rank("anyone")] == "system"

    @pytest.mark.parametrize(
        ("text", "field"),
        [
            ('[writers]\n"a" = "boss"\n', "writers.a"),
            ('[writers]\n"a*b" = "peer"\n', "writers.a*b"),
            ('[writers]\n"a" = 3\n', "writers.a"),
            ('[authority]\nwriter_default = "boss"\n', "authority.writer_default"),
            ('[authority]\nover_claim = "maybe"\n', "authority.over_claim"),
        ],
    )
    def test_invalid_writer_entries(self, text: str, field: str) -> None:
        with pytest.raises(PolicyError) as info:
            parse_policy(text)
        assert info.value.field == field
        assert info.value.line is not None

    def test_policy_without_writers_keeps_its_digest(self) -> None:
        assert parse_policy("[writers]\n").digest == DEFAULT_POLICY.digest
        assert writers_policy().digest != DEFAULT_POLICY.digest
        assert writers_policy().digest == independent_digest(writers_policy())
        assert Policy.from_dict(writers_policy().to_dict()) == writers_policy()

    def test_strict_gives_unlisted_writers_the_lowest_level_and_refuses(self) -> None:
        strict = load_policy(POLICIES / "strict.toml")
        assert strict.writer_rank("someone-unlisted") == 0
        assert strict.over_claim == "refuse"


# every event type that carries authority: (event dicts before the attack, the attack)
_HIDDEN_EXEC = A("F1", "salary", "$1", authority="executive", visibility={"roles": ["board"]})
ATTACKS = {
    "assert-supersedes": (
        [A("F1", "k", "exec's", authority="executive")],
        A("F2", "k", "forged", authority="policy", supersedes=["F1"], actor="mallory"),
    ),
    "retract": ([A("F1", "k", "exec's", authority="executive")], R("F1", authority="policy", actor="mallory")),
    "promote": (
        [A("F1", "k", "draft", authority="executive", status="draft")],
        P("F1", authority="policy", actor="mallory"),
    ),
    "grant-fact": ([_HIDDEN_EXEC], G(fact="F1", to_actor="alice", authority="policy", actor="mallory")),
    "grant-key": ([_HIDDEN_EXEC], G(key="salary", to_actor="alice", authority="policy", actor="mallory")),
    "revoke": (
        [_HIDDEN_EXEC, G(fact="F1", to_actor="alice", authority="executive", actor="exec")],
        V(fact="F1", to_actor="alice", authority="policy", actor="mallory"),
    ),
}


class TestWriterAuthorityAttack:
    """A writer claiming more authority than it holds gains nothing (capped, listed under
    ``ignored``), or is refused at validation where the policy says ``over_claim = "refuse"``."""

    LOW = 'writer_default = "subordinate"'

    def events(self, name: str) -> list[dict[str, Any]]:
        before, attack = ATTACKS[name]
        return [{**e, "actor": e.get("actor", "exec")} for e in before] + [attack]

    @pytest.mark.parametrize("name", sorted(ATTACKS))
    def test_trusted_when_no_writer_binds_the_claim(self, name: str) -> None:
        """The control: without writers' bounds the forged claim works (so the test can fail)."""
        honest = run(*self.events(name), policy=DEFAULT_POLICY)
        assert effect(name, honest)

    @pytest.mark.parametrize("name", sorted(ATTACKS))
    def test_capped_by_default(self, name: str) -> None:
        policy = writers_policy(self.LOW)
        res = run(*self.events(name), policy=policy)
        assert not effect(name, res), res.to_json()
        attack_id = f"e{len(self.events(name))}"
        capped = {(i.event, i.code) for i in res.ignored}
        assert (attack_id, "authority_capped") in capped

    @pytest.mark.parametrize("name", sorted(ATTACKS))
    def test_refused_under_refuse(self, name: str) -> None:
        policy = writers_policy(self.LOW + '\nover_claim = "refuse"')
        with pytest.raises(ValueTypeError) as info:
            log(*self.events(name), policy=policy)
        assert info.value.field == "authority"
        assert info.value.line == len(self.events(name))
        assert "mallory" in str(info.value)

    def test_claim_within_what_the_writer_holds_is_kept(self) -> None:
        policy = writers_policy(self.LOW + '\nover_claim = "refuse"')
        res = run(A("F1", "k", "v", authority="manager", actor="hr-ann"), policy=policy)
        assert res.admitted[0].authority == "manager"
        assert res.ignored == ()

    def test_admitted_authority_is_the_effective_one(self) -> None:
        res = run(A("F1", "k", "v", authority="policy", actor="mallory"), policy=writers_policy(self.LOW))
        assert res.admitted[0].authority == "subordinate"


def effect(name: str, res: Any) -> bool:
    """Whether the attack took effect."""
    admitted = {a.fact: a for a in res.admitted}
    if name == "assert-supersedes":
        return "F1" not in admitted
    if name == "retract":
        return "F1" not in admitted
    if name == "promote":
        return "F1" in admitted
    if name.startswith("grant"):
        return "F1" in admitted
    return "F1" not in admitted  # revoke: the executive's grant is ended


class TestClockSkew:
    def test_default_and_digest(self) -> None:
        assert DEFAULT_POLICY.clock_skew_seconds == 300
        assert parse_policy("[store]\nclock_skew_seconds = 300\n").digest == DEFAULT_POLICY.digest
        p = parse_policy("[store]\nclock_skew_seconds = 60\n")
        assert p.clock_skew_seconds == 60 and Policy.from_dict(p.to_dict()) == p

    @pytest.mark.parametrize("value", ["-1", "true", '"300"'])
    def test_invalid(self, value: str) -> None:
        with pytest.raises(PolicyError) as info:
            parse_policy(f"[store]\nclock_skew_seconds = {value}\n")
        assert (info.value.field, info.value.line) == ("store.clock_skew_seconds", 2)
