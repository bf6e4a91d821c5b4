package shell

import (
	"strconv"

	"github.com/itchyny/gojq"
)

// jqVisit walks a parsed filter, the one place that knows where gojq's
// AST keeps queries: onQuery sees every query and onTerm every term
// before their parts, and the walk goes into a node's parts only when its
// callback says true. A callback may rewrite its node in place; the walk
// then goes into the node as rewritten. Every kind of node that holds a
// query is walked (function bodies and arguments, object keys and
// values, string interpolations, index and slice bounds of a term and of
// its suffixes, if/try/reduce/foreach/label, unary operands, and the
// object keys of destructuring patterns), so a check built on it sees
// all of a filter.
func jqVisit(q *gojq.Query, onQuery func(*gojq.Query) bool, onTerm func(*gojq.Term) bool) {
	v := jqVisitor{onQuery, onTerm}
	v.query(q)
}

type jqVisitor struct {
	onQuery func(*gojq.Query) bool
	onTerm  func(*gojq.Term) bool
}

func (v jqVisitor) query(q *gojq.Query) {
	if q == nil || !v.onQuery(q) {
		return
	}
	for _, fd := range q.FuncDefs {
		v.query(fd.Body)
	}
	v.patterns(q.Patterns)
	v.query(q.Left)
	v.query(q.Right)
	v.term(q.Term)
}

func (v jqVisitor) str(s *gojq.String) {
	if s != nil {
		for _, q := range s.Queries {
			v.query(q)
		}
	}
}

func (v jqVisitor) index(x *gojq.Index) {
	if x != nil {
		v.str(x.Str)
		v.query(x.Start)
		v.query(x.End)
	}
}

func (v jqVisitor) patterns(ps []*gojq.Pattern) {
	for _, p := range ps {
		if p == nil {
			continue
		}
		v.patterns(p.Array)
		for _, o := range p.Object {
			v.str(o.KeyString)
			v.query(o.KeyQuery)
			if o.Val != nil {
				v.patterns([]*gojq.Pattern{o.Val})
			}
		}
	}
}

func (v jqVisitor) term(t *gojq.Term) {
	if t == nil || !v.onTerm(t) {
		return
	}
	v.index(t.Index)
	if t.Func != nil {
		for _, a := range t.Func.Args {
			v.query(a)
		}
	}
	if t.Object != nil {
		for _, kv := range t.Object.KeyVals {
			v.str(kv.KeyString)
			v.query(kv.KeyQuery)
			v.query(kv.Val)
		}
	}
	if t.Array != nil {
		v.query(t.Array.Query)
	}
	if t.Unary != nil {
		v.term(t.Unary.Term)
	}
	v.str(t.Str)
	if t.If != nil {
		v.query(t.If.Cond)
		v.query(t.If.Then)
		for _, e := range t.If.Elif {
			v.query(e.Cond)
			v.query(e.Then)
		}
		v.query(t.If.Else)
	}
	if t.Try != nil {
		v.query(t.Try.Body)
		v.query(t.Try.Catch)
	}
	if t.Reduce != nil {
		v.query(t.Reduce.Query)
		v.patterns(t.Reduce.Patterns)
		v.query(t.Reduce.Start)
		v.query(t.Reduce.Update)
	}
	if t.Foreach != nil {
		v.query(t.Foreach.Query)
		v.patterns(t.Foreach.Patterns)
		v.query(t.Foreach.Start)
		v.query(t.Foreach.Update)
		v.query(t.Foreach.Extract)
	}
	if t.Label != nil {
		v.query(t.Label.Body)
	}
	v.query(t.Query)
	for _, s := range t.SuffixList {
		v.index(s.Index)
	}
}

// jqPrune drops the definitions of jqPrelude and jqBuiltins16 that the
// filter does not reach, by name and arity (keeping too many is safe; a
// definition is dropped only when nothing kept calls its name): gojq
// compiles every definition it is given, and a hundred of them took
// most of a small call's time.
func jqPrune(q *gojq.Query) {
	if len(q.FuncDefs) == 0 {
		return
	}
	// what gojq or jqRewrite call by name: string interpolation calls
	// tostring, .. calls recurse
	need := map[string]bool{"tostring/0": true, "tojson/0": true, "recurse/0": true}
	refs := func(q *gojq.Query) {
		jqVisit(q, func(*gojq.Query) bool { return true }, func(t *gojq.Term) bool {
			if t.Func != nil {
				need[t.Func.Name+"/"+strconv.Itoa(len(t.Func.Args))] = true
			}
			return true
		})
	}
	body := *q
	body.FuncDefs = nil
	refs(&body)
	keep := make([]bool, len(q.FuncDefs))
	for changed := true; changed; {
		changed = false
		for i, fd := range q.FuncDefs {
			if !keep[i] && need[fd.Name+"/"+strconv.Itoa(len(fd.Args))] {
				keep[i], changed = true, true
				refs(fd.Body)
			}
		}
	}
	defs := q.FuncDefs[:0]
	for i, fd := range q.FuncDefs {
		if keep[i] {
			defs = append(defs, fd)
		}
	}
	q.FuncDefs = defs
}
