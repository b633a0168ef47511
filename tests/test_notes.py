"""Signed notes and checkpoints read as bytes, by the C2SP grammar as Go's sumdb/note reads it.

``CASES`` names notes with the answer both implementations must give: ``ok`` (a checkpoint
signed by ``KEY``), ``rejected`` (well-formed, not signed by ``KEY``) or ``malformed``.
tests/test_go_interop.py puts the same cases to Go.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gamma.audit._note import MAX_SIGNATURES, open_note, sign_note
from gamma.audit.checkpoint import (
    MAX_TREE_SIZE,
    SignerKey,
    VerifierKey,
    generate_key,
    parse_checkpoint,
    parse_signer,
    parse_verifier,
    sign_checkpoint,
    verify_checkpoint,
)
from gamma.core.integrity.merkle import EMPTY_ROOT, TreeHead
from gamma.core.terms.errors import InputError

KEY = SignerKey("log.example/gamma", bytes(range(32)))
OTHER = SignerKey("other.example/witness", bytes(range(32, 64)))
ROOT = bytes(range(100, 132))
HEAD = TreeHead(5, ROOT.hex())
B64_ROOT = base64.b64encode(ROOT)


def signed(text: bytes, key: SignerKey = KEY) -> bytes:
    """``text`` signed by ``key`` whatever it holds (a signer that checks nothing)."""
    return sign_note(text, key.name, key.verifier().key_id, key.sign)


def body(size: bytes = b"5", root: bytes = B64_ROOT, origin: bytes = b"log.example/gamma",
         extra: bytes = b"") -> bytes:
    return origin + b"\n" + size + b"\n" + root + b"\n" + extra


def line(name: bytes, raw: bytes) -> bytes:
    return "\u2014 ".encode() + name + b" " + base64.b64encode(raw) + b"\n"


VALID = sign_checkpoint(HEAD, KEY).encode()
FOREIGN = line(b"other.example/witness", b"\x01\x02\x03\x04" + bytes(64))
SIG_LINE = VALID[VALID.rindex(b"\n\n") + 2 :]
FLIPPED = SIG_LINE[:-3] + (b"A" if SIG_LINE[-3:-2] != b"A" else b"B") + SIG_LINE[-2:]
ROOT_EDGE = B64_ROOT[:42] + bytes([B64_ROOT[42] ^ 1]) + b"="  # non-zero padding bits

CASES: dict[str, tuple[bytes, str]] = {
    # accepted by both
    "valid": (VALID, "ok"),
    "foreign_signature_after": (VALID + FOREIGN, "ok"),
    "foreign_signature_before": (signed(body())[: -len(SIG_LINE)] + FOREIGN + SIG_LINE, "ok"),
    "second_line_of_the_key_unread": (VALID + FLIPPED, "ok"),
    "extension_lines": (signed(body(extra=b"ext one\n\xc3\xa9t\xc3\xa9 2\n")), "ok"),
    "empty_tree": (signed(body(b"0", base64.b64encode(EMPTY_ROOT))), "ok"),
    "largest_size": (signed(body(str(MAX_TREE_SIZE).encode())), "ok"),
    "del_and_c1_in_origin": (signed(body(origin=b"log\x7f\xc2\x80example")), "ok"),
    "del_in_foreign_name": (VALID + line(b"other\x7f", bytes(68)), "ok"),
    "noncanonical_root_padding_bits": (signed(body(root=ROOT_EDGE)), "ok"),
    f"{MAX_SIGNATURES}_signature_lines": (VALID + FOREIGN * (MAX_SIGNATURES - 1), "ok"),
    # well-formed, not signed by KEY
    "size_edited": (VALID.replace(b"\n5\n", b"\n6\n"), "rejected"),
    "size_edited_to_superscript": (VALID.replace(b"\n5\n", "\n\u00b2\n".encode()), "rejected"),
    "signed_by_another_key": (signed(body(), SignerKey(KEY.name, bytes(32))), "rejected"),
    "first_line_of_the_key_bad": (VALID[: -len(SIG_LINE)] + FLIPPED + SIG_LINE, "rejected"),
    "only_foreign_signatures": (VALID[: -len(SIG_LINE)] + FOREIGN, "rejected"),
    "signature_of_one_byte": (
        VALID[: -len(SIG_LINE)] + line(KEY.name.encode(), KEY.verifier().key_id + b"!"), "rejected"),
    "signature_of_65_bytes": (
        VALID[: -len(SIG_LINE)] + line(KEY.name.encode(), KEY.verifier().key_id + bytes(65)),
        "rejected"),
    # the note's grammar
    "crlf": (VALID.replace(b"\n", b"\r\n"), "malformed"),
    "cr": (VALID.replace(b"\n", b"\r"), "malformed"),
    "cr_in_origin": (signed(body(origin=b"log.example/gamma\r")), "malformed"),
    "nul_in_origin": (signed(body(origin=b"log\x00example")), "malformed"),
    "tab_in_origin": (signed(body(origin=b"log\texample")), "malformed"),
    "escape_in_origin": (signed(body(origin=b"log\x1b[2Jexample")), "malformed"),
    "invalid_utf8": (signed(body(origin=b"log\xffexample")), "malformed"),
    "utf8_surrogate": (signed(body(origin=b"log\xed\xa0\x80")), "malformed"),
    "utf8_overlong": (signed(body(origin=b"log\xc0\xaf")), "malformed"),
    "no_blank_line": (VALID.replace(b"\n\n", b"\n"), "malformed"),
    "no_final_newline": (VALID[:-1], "malformed"),
    "no_signature_lines": (body() + b"\n", "malformed"),
    "blank_line_after_signatures": (VALID + b"\n", "malformed"),
    "hyphen_for_em_dash": (VALID.replace("\u2014".encode(), b"-"), "malformed"),
    "no_space_after_dash": (VALID.replace("\u2014 ".encode(), "\u2014".encode()), "malformed"),
    "extra_line_no_signature": (VALID + "\u2014 other.example\n".encode(), "malformed"),
    "extra_line_not_base64": (VALID + "\u2014 other.example !!!!\n".encode(), "malformed"),
    "extra_line_empty_base64": (VALID + "\u2014 other.example \n".encode(), "malformed"),
    "extra_line_unpadded": (VALID + FOREIGN.replace(b"=", b""), "malformed"),
    "extra_line_four_bytes": (VALID + line(b"other.example", b"\x01\x02\x03\x04"), "malformed"),
    "extra_line_empty_name": (VALID + line(b"", bytes(68)), "malformed"),
    "extra_line_plus_in_name": (VALID + line(b"a+b", bytes(68)), "malformed"),
    "extra_line_nbsp_in_name": (VALID + line("a\u00a0b".encode(), bytes(68)), "malformed"),
    "extra_line_nel_in_name": (VALID + line("a\u0085b".encode(), bytes(68)), "malformed"),
    "extra_line_ideographic_space": (VALID + line("a\u3000b".encode(), bytes(68)), "malformed"),
    "extra_line_two_spaces": (VALID + FOREIGN.replace(b" ", b"  ", 2)[: -1] + b"\n", "malformed"),
    "extra_line_trailing_space": (VALID + FOREIGN[:-1] + b" \n", "malformed"),
    f"{MAX_SIGNATURES + 1}_signature_lines": (VALID + FOREIGN * MAX_SIGNATURES, "malformed"),
    "malformed_line_after_bad_signature": (
        VALID[: -len(SIG_LINE)] + FLIPPED + b"junk\n", "rejected"),  # Go stops at the bad one
    # the checkpoint's grammar, in a note signed by KEY
    "size_superscript_two": (signed(body("\u00b2".encode())), "malformed"),
    "size_arabic_indic_digit": (signed(body("\u0665".encode())), "malformed"),
    "size_fullwidth_digit": (signed(body("\uff15".encode())), "malformed"),
    "size_leading_zero": (signed(body(b"05")), "malformed"),
    "size_plus": (signed(body(b"+5")), "malformed"),
    "size_minus_zero": (signed(body(b"-0")), "malformed"),
    "size_leading_space": (signed(body(b" 5")), "malformed"),
    "size_trailing_space": (signed(body(b"5 ")), "malformed"),
    "size_underscore": (signed(body(b"1_000")), "malformed"),
    "size_hex": (signed(body(b"0x5")), "malformed"),
    "size_empty": (signed(body(b"")), "malformed"),
    "size_above_int64": (signed(body(str(MAX_TREE_SIZE + 1).encode())), "malformed"),
    "root_not_base64": (signed(body(root=b"not base64!")), "malformed"),
    "root_unpadded": (signed(body(root=B64_ROOT.rstrip(b"="))), "malformed"),
    "root_31_bytes": (signed(body(root=base64.b64encode(ROOT[:31]))), "malformed"),
    "root_33_bytes": (signed(body(root=base64.b64encode(ROOT + b"!"))), "malformed"),
    "root_hex": (signed(body(root=ROOT.hex().encode())), "malformed"),
    "empty_origin": (signed(body(origin=b"")), "malformed"),
    "two_lines": (signed(b"log.example/gamma\n5\n"), "malformed"),
    "empty_extension_line": (signed(body(extra=b"\n")), "malformed"),
    "empty_line_between_extensions": (signed(body(extra=b"\next\n")), "malformed"),
}


def answer(note: bytes, key: SignerKey = KEY) -> str:
    try:
        checkpoint = verify_checkpoint(note, key.verifier())
    except InputError:
        return "malformed"
    return "rejected" if checkpoint is None else "ok"


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_gets_its_answer(name: str) -> None:
    note, expected = CASES[name]
    assert answer(note) == expected


def test_a_note_and_its_text_read_the_same() -> None:
    checkpoint = verify_checkpoint(VALID.decode(), KEY.verifier())
    assert checkpoint == verify_checkpoint(VALID, KEY.verifier())
    assert checkpoint is not None and checkpoint.head == HEAD
    assert checkpoint.origin == KEY.name and checkpoint.note == VALID.decode()
    assert checkpoint.body.encode() == body()
    with pytest.raises(InputError, match="control character 0x0d"):
        verify_checkpoint(VALID.decode().replace("\n", "\r\n"), KEY.verifier())
    with pytest.raises(InputError, match="not valid Unicode"):
        verify_checkpoint(VALID.decode() + "\ud800", KEY.verifier())


def test_errors_name_the_line() -> None:
    with pytest.raises(InputError) as caught:
        verify_checkpoint(CASES["size_superscript_two"][0], KEY.verifier(), source="cp")
    assert (caught.value.source, caught.value.line, caught.value.field) == ("cp", 2, "size")
    with pytest.raises(InputError) as caught:
        verify_checkpoint(VALID + FOREIGN + b"junk\n", KEY.verifier())
    assert caught.value.line == 7


def test_parse_reads_every_line_unverified() -> None:
    note = CASES["extension_lines"][0] + FOREIGN
    checkpoint, signatures = parse_checkpoint(note)
    assert checkpoint.extensions == ("ext one", "\u00e9t\u00e9 2")
    assert checkpoint.body.encode() == body(extra=b"ext one\n\xc3\xa9t\xc3\xa9 2\n")
    assert [name for name, _ in signatures] == [KEY.name, "other.example/witness"]
    for name in ("size_superscript_two", "crlf", "extra_line_nbsp_in_name"):
        with pytest.raises(InputError):
            parse_checkpoint(CASES[name][0])


def test_the_signed_note_example_of_c2sp() -> None:
    vkey = parse_verifier("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
    note = ("This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6"
            "TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n").encode()
    assert open_note(note, vkey.name, vkey.key_id, vkey.verify) == b"This is an example message.\n"
    tampered = note.replace(b"example message", b"example massage")
    assert open_note(tampered, vkey.name, vkey.key_id, vkey.verify) is None


BAD_NAMES = ["", "a b", "a+b", "a\tb", "a\x00b", "a\x1fb", "a\x7fb", "a\x85b", "a\u00a0b",
             "a\u2003b", "a\u3000b", "a\ud800b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_key_names_are_printable_without_spaces_or_plus(name: str) -> None:
    with pytest.raises(InputError):
        generate_key(name)
    with pytest.raises(InputError):
        VerifierKey(name, bytes(32))
    with pytest.raises(InputError):
        SignerKey(name, bytes(32))
    encoded = KEY.verifier().encode().replace(KEY.name, name, 1)
    with pytest.raises(InputError):
        parse_verifier(encoded)


@pytest.mark.parametrize("origin", ["", " lead", "trail ", "a\nb", "a\rb", "a\x00b", "a\x7fb",
                                    "a\x9bb", "a\ud800b"])
def test_an_origin_gamma_signs_is_one_printable_line(origin: str) -> None:
    with pytest.raises(InputError) as caught:
        sign_checkpoint(HEAD, KEY, origin=origin)
    assert caught.value.field == "origin"


def test_key_encodings_read_as_go_writes_them() -> None:
    vkey = KEY.verifier().encode()
    name, key_id, blob = vkey.split("+", 2)
    assert parse_verifier(f"{name}+{key_id.upper()}+{blob}") == KEY.verifier()
    assert parse_signer(KEY.encode()) == KEY
    for broken in (f"{name}+{key_id[:7]}+{blob}", f"{name}+{key_id}0+{blob}",
                   f"{name}+{key_id}+{blob[:-1]}", f"{name}+ {key_id[1:]}+{blob}",
                   f"{name}+{key_id}+{blob[:-4]}", f"{name}+{key_id}"):
        with pytest.raises(InputError):
            parse_verifier(broken)
    with pytest.raises(InputError, match="does not match"):
        parse_verifier(f"{name}+{'0' * 8}+{blob}")


def test_signing_refuses_what_it_could_not_read() -> None:
    with pytest.raises(InputError):
        sign_checkpoint(TreeHead(MAX_TREE_SIZE + 1, HEAD.root), KEY)
    big = sign_checkpoint(TreeHead(MAX_TREE_SIZE, HEAD.root), KEY)
    checkpoint = verify_checkpoint(big, KEY.verifier())
    assert checkpoint is not None and checkpoint.head.size == MAX_TREE_SIZE


PIECES = [b"\r", b"\n", b"\x00", b"\x7f", b"\xc2\x85", b"\xc2\xa0", b" ", b"+", b"=",
          "\u2014".encode(), b"\xff", b"0", b"A"]


def mutate(data: st.DataObject, note: bytes) -> bytes:
    """``note`` with a few bytes inserted, deleted or replaced (CR, NUL, DEL, NEL, NBSP...)."""
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(note)))
        cut = data.draw(st.integers(0, 2))
        note = note[:at] + data.draw(st.sampled_from(PIECES)) + note[at + cut :]
    return note


@given(st.data())
def test_any_edit_is_an_answer_never_a_crash(data: st.DataObject) -> None:
    original = data.draw(st.sampled_from([VALID, VALID + FOREIGN, CASES["extension_lines"][0]]))
    note = mutate(data, original)
    verdict = answer(note)
    if verdict == "ok":  # a signature holds only where the edit left the signed text alone
        checkpoint = verify_checkpoint(note, KEY.verifier())
        assert checkpoint is not None
        assert checkpoint.body.encode() == original[: original.rindex(b"\n\n") + 1]
    if b"\r" in note or b"\x00" in note:
        assert verdict == "malformed"
