package engine

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The table tests' cases, written for evaluators outside this package:
// test/regodiff decides each with OPA over the exported Rego and with the
// engine, and requires the same result. Regenerate with
//
//	go test ./engine -run 'TestEvaluate|TestGateway|TestOperators' -write-corpus ../test/regodiff/testdata/engine-cases.json
var writeCorpus = flag.String("write-corpus", "", "write the table tests' cases (bundle, request, clock, usage counts) as JSON to this file")

// CorpusCase is one recorded evaluation. Counts are what the case's Usage
// answers for the call, keyed as input.counts is: calls and tokens by
// "per/window", and a shared limit's by "shared/per/LimitID" (what the
// case's SharedUsage answers, or its Usage when it has none).
type corpusCase struct {
	Name    string                      `json:"name"`
	Bundle  Bundle                      `json:"bundle"`
	Request json.RawMessage             `json:"request"`
	Now     time.Time                   `json:"now"`
	Counts  map[string]map[string]int64 `json:"counts,omitempty"`
	Tokens  map[string]float64          `json:"tokens,omitempty"`
}

var corpus struct {
	sync.Mutex
	cases []corpusCase
}

// record keeps one case when -write-corpus is set.
func record(t testing.TB, b Bundle, req Request, now time.Time, u Usage, shared SharedUsage) {
	if *writeCorpus == "" {
		return
	}
	doc, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	c := corpusCase{Name: t.Name(), Bundle: b, Request: doc, Now: now.UTC()}
	if u != nil || shared != nil {
		agent, session := UsageKeys(req)
		tool, _ := req["tool_name"].(string)
		for _, p := range b.Policies {
			for _, r := range p.Rules {
				if r.When == nil {
					continue
				}
				for _, l := range []*Limit{r.When.RateLimit, r.When.TokenBudget} {
					if l == nil {
						continue
					}
					d, err := ParseWindow(l.Window)
					if err != nil {
						continue
					}
					key, per := agent, PerAgent
					switch l.Per {
					case PerSession:
						key, per = session, PerSession
					case PerNamespace:
						key, per = UsageKey{Namespace: true}, PerNamespace
					}
					name := per + "/" + d.String()
					tokens := l == r.When.TokenBudget
					calls, used := int64(0), 0.0
					if u != nil {
						if tokens {
							used = u.Tokens(key, d, now)
						} else {
							calls = u.Calls(key, tool, d, now)
						}
					}
					if l.Store == StoreShared {
						kind := ""
						if p.Kind == KindClusterPolicy {
							kind = KindClusterPolicy
						}
						id := LimitID(kind, p.ID, r.ID, tokens)
						name = "shared/" + per + "/" + id
						if shared != nil {
							q := SharedQuery{Limit: id, Key: key, Tokens: tokens, Window: d, Max: l.Max, Add: CallTokens(req), FailOpen: l.FailOpen}
							if !tokens {
								q.Tool, q.Add = tool, 1
							}
							used = shared.Shared(q)
							calls = int64(used)
						}
					}
					if !tokens {
						if c.Counts == nil {
							c.Counts = map[string]map[string]int64{"calls": {}}
						}
						c.Counts["calls"][name] = calls
					} else {
						if c.Tokens == nil {
							c.Tokens = map[string]float64{}
						}
						c.Tokens[name] = used
					}
				}
			}
		}
	}
	corpus.Lock()
	corpus.cases = append(corpus.cases, c)
	corpus.Unlock()
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if *writeCorpus != "" && code == 0 {
		slices.SortStableFunc(corpus.cases, func(a, b corpusCase) int { return strings.Compare(a.Name, b.Name) })
		// One case a line, so a changed case is a changed line.
		doc := []byte("[\n")
		var err error
		for i, c := range corpus.cases {
			line, merr := json.Marshal(c)
			if merr != nil {
				err = merr
				break
			}
			if i > 0 {
				doc = append(doc, ",\n"...)
			}
			doc = append(doc, line...)
		}
		doc = append(doc, "\n]\n"...)
		if err == nil {
			err = os.WriteFile(*writeCorpus, doc, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
