package shell

// jqCorpusKnown are corpus-jq.txt's commands that the fast path answers
// unlike jq 1.6 today, each with why (TestJqCorpus counts them as wrong).
// None: what the fast path cannot answer as 1.6 does is routed.
func init() {
	jqCorpusKnown = map[string]string{}
}
