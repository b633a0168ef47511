// Command gammacheck is the Go side of gamma's interop test (tests/test_go_interop.py): it
// answers with golang.org/x/mod/sumdb/note and sumdb/tlog alone, so a checkpoint or proof
// that gamma writes and Go accepts (and the reverse) is checked by a second implementation.
//
// It reads one JSON array of requests on stdin and writes one JSON array of answers, in
// order, on stdout; byte strings travel as base64 (encoding/json's []byte), hashes as hex.
//
//	keygen:     name, seed (32 bytes)        -> skey, vkey        (note.GenerateKey)
//	sign:       text, skeys                  -> note              (note.Sign)
//	open:       note, vkeys                  -> status, origin, size, root
//	tree:       leaves, sizes, inclusions, consistencies
//	            -> roots, leaf_hashes, inclusion_ok, inclusion_go, consistency_ok, consistency_go
//
// open's status is "ok", "malformed" (the note or its checkpoint text breaks the grammar),
// "invalid" (a known key's signature does not verify) or "unverified" (no known key signed).
// The checkpoint text is read as c2sp.org/tlog-checkpoint: a non-empty origin line, then the
// size and root hash lines parsed by tlog.ParseTree (given the origin it expects), then
// extension lines, each non-empty.
package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Index int64    `json:"index"`
	Size  int64    `json:"size"`
	Root  string   `json:"root"`
	Path  []string `json:"path"`
}

type consistency struct {
	First      int64    `json:"first"`
	Second     int64    `json:"second"`
	FirstRoot  string   `json:"first_root"`
	SecondRoot string   `json:"second_root"`
	Path       []string `json:"path"`
}

type request struct {
	Op            string        `json:"op"`
	Name          string        `json:"name"`
	Seed          []byte        `json:"seed"`
	Text          []byte        `json:"text"`
	Note          []byte        `json:"note"`
	Skeys         []string      `json:"skeys"`
	Vkeys         []string      `json:"vkeys"`
	Leaves        [][]byte      `json:"leaves"`
	Sizes         []int64       `json:"sizes"`
	Inclusions    []inclusion   `json:"inclusions"`
	Consistencies []consistency `json:"consistencies"`
}

type answer struct {
	Status        string     `json:"status,omitempty"`
	Error         string     `json:"error,omitempty"`
	Skey          string     `json:"skey,omitempty"`
	Vkey          string     `json:"vkey,omitempty"`
	Note          []byte     `json:"note,omitempty"`
	Origin        string     `json:"origin,omitempty"`
	Size          int64      `json:"size"`
	Root          string     `json:"root,omitempty"`
	Roots         []string   `json:"roots,omitempty"`
	LeafHashes    []string   `json:"leaf_hashes,omitempty"`
	InclusionOK   []bool     `json:"inclusion_ok,omitempty"`
	InclusionGo   [][]string `json:"inclusion_go,omitempty"`
	ConsistencyOK []bool     `json:"consistency_ok,omitempty"`
	ConsistencyGo [][]string `json:"consistency_go,omitempty"`
}

var errMalformedCheckpoint = errors.New("malformed checkpoint")

func main() {
	var requests []request
	if err := json.NewDecoder(os.Stdin).Decode(&requests); err != nil {
		fmt.Fprintln(os.Stderr, "gammacheck: bad request:", err)
		os.Exit(2)
	}
	answers := make([]answer, len(requests))
	for i, r := range requests {
		a, err := handle(r)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gammacheck: request %d (%s): %v\n", i, r.Op, err)
			os.Exit(2)
		}
		answers[i] = a
	}
	if err := json.NewEncoder(os.Stdout).Encode(answers); err != nil {
		fmt.Fprintln(os.Stderr, "gammacheck:", err)
		os.Exit(2)
	}
}

func handle(r request) (answer, error) {
	switch r.Op {
	case "keygen":
		skey, vkey, err := note.GenerateKey(bytes.NewReader(r.Seed), r.Name)
		return answer{Skey: skey, Vkey: vkey}, err
	case "sign":
		signers := make([]note.Signer, len(r.Skeys))
		for i, skey := range r.Skeys {
			s, err := note.NewSigner(skey)
			if err != nil {
				return answer{}, err
			}
			signers[i] = s
		}
		msg, err := note.Sign(&note.Note{Text: string(r.Text)}, signers...)
		if err != nil {
			return answer{Status: "malformed", Error: err.Error()}, nil
		}
		return answer{Status: "ok", Note: msg}, nil
	case "open":
		return open(r)
	case "tree":
		return tree(r)
	}
	return answer{}, fmt.Errorf("unknown op %q", r.Op)
}

func open(r request) (answer, error) {
	verifiers := make([]note.Verifier, len(r.Vkeys))
	for i, vkey := range r.Vkeys {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return answer{}, err
		}
		verifiers[i] = v
	}
	n, err := note.Open(r.Note, note.VerifierList(verifiers...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return answer{Status: "unverified", Error: err.Error()}, nil
		case errors.As(err, &invalid):
			return answer{Status: "invalid", Error: err.Error()}, nil
		}
		return answer{Status: "malformed", Error: err.Error()}, nil
	}
	origin, size, root, err := parseCheckpoint(n.Text)
	if err != nil {
		return answer{Status: "malformed", Error: err.Error()}, nil
	}
	return answer{Status: "ok", Origin: origin, Size: size, Root: root}, nil
}

// parseCheckpoint reads a checkpoint's text: its size and root lines through tlog.ParseTree.
func parseCheckpoint(text string) (string, int64, string, error) {
	if len(text) > 1e6 {
		return "", 0, "", errMalformedCheckpoint
	}
	origin, rest, found := strings.Cut(text, "\n")
	if !found || origin == "" {
		return "", 0, "", errMalformedCheckpoint
	}
	t, err := tlog.ParseTree([]byte("go.sum database tree\n" + rest))
	if err != nil {
		return "", 0, "", err
	}
	lines := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
	for _, extension := range lines[2:] {
		if extension == "" {
			return "", 0, "", errMalformedCheckpoint
		}
	}
	return origin, t.N, hex.EncodeToString(t.Hash[:]), nil
}

func tree(r request) (answer, error) {
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, index := range indexes {
			out[i] = stored[index]
		}
		return out, nil
	})
	a := answer{}
	for i, leaf := range r.Leaves {
		hashes, err := tlog.StoredHashes(int64(i), leaf, reader)
		if err != nil {
			return a, err
		}
		stored = append(stored, hashes...)
		a.LeafHashes = append(a.LeafHashes, hex.EncodeToString(hashes[0][:]))
	}
	for _, size := range r.Sizes {
		h, err := tlog.TreeHash(size, reader)
		if err != nil {
			return a, err
		}
		a.Roots = append(a.Roots, hex.EncodeToString(h[:]))
	}
	for _, p := range r.Inclusions {
		path, root, err := hashes(p.Path, p.Root)
		if err != nil {
			return a, err
		}
		leaf := tlog.RecordHash(r.Leaves[p.Index])
		a.InclusionOK = append(a.InclusionOK, tlog.CheckRecord(path, p.Size, root, p.Index, leaf) == nil)
		own, err := tlog.ProveRecord(p.Size, p.Index, reader)
		if err != nil {
			return a, err
		}
		a.InclusionGo = append(a.InclusionGo, hexes(own))
	}
	for _, p := range r.Consistencies {
		path, second, err := hashes(p.Path, p.SecondRoot)
		if err != nil {
			return a, err
		}
		first, err := parseHex(p.FirstRoot)
		if err != nil {
			return a, err
		}
		ok := tlog.CheckTree(path, p.Second, second, p.First, first) == nil
		a.ConsistencyOK = append(a.ConsistencyOK, ok)
		own, err := tlog.ProveTree(p.Second, p.First, reader)
		if err != nil {
			return a, err
		}
		a.ConsistencyGo = append(a.ConsistencyGo, hexes(own))
	}
	return a, nil
}

// parseHex reads a hash written as hex (gamma's proofs write them so).
func parseHex(s string) (tlog.Hash, error) {
	var h tlog.Hash
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != tlog.HashSize {
		return h, fmt.Errorf("not a hex hash: %q", s)
	}
	copy(h[:], raw)
	return h, nil
}

func hashes(path []string, root string) ([]tlog.Hash, tlog.Hash, error) {
	out := make([]tlog.Hash, len(path))
	for i, p := range path {
		h, err := parseHex(p)
		if err != nil {
			return nil, tlog.Hash{}, err
		}
		out[i] = h
	}
	r, err := parseHex(root)
	return out, r, err
}

func hexes(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h[:])
	}
	return out
}
