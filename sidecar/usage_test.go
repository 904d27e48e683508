package sidecar

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// testClock is an injected clock tests move by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// limitsBundle denies pay at 10 calls an hour per agent, Bash at 2 an
// hour per session (and warns on every Bash it allows), and any call that
// takes an agent past 100 tokens an hour.
func limitsBundle() engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "limits", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-hourly", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: "1h", Per: engine.PerAgent}}},
		{ID: "bash-twice", Effect: "deny", Targets: &engine.Targets{Tools: []string{"Bash"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: 2, Window: "1h", Per: engine.PerSession}}},
		{ID: "bash-watched", Effect: "warn", Description: "Bash is watched", Targets: &engine.Targets{Tools: []string{"Bash"}}},
		{ID: "token-budget", Effect: "deny",
			When: &engine.When{TokenBudget: &engine.Limit{Max: 100, Window: "1h", Per: engine.PerAgent}}},
	}}}}
}

// limitsServer serves limitsBundle at an injected clock, logging decisions.
func limitsServer(t *testing.T, tune func(*Options)) (*Server, string, *testClock, *lineBuffer) {
	t.Helper()
	clock := &testClock{now: time.Date(2030, 1, 31, 9, 0, 0, 0, time.UTC)}
	o := testOptions()
	logs := &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	o.now = clock.Now
	if tune != nil {
		tune(&o)
	}
	s, base := newTestServer(t, o)
	doc, _ := encode(t, limitsBundle())
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	return s, base, clock, logs
}

func TestRateLimitIsEnforcedOverHTTP(t *testing.T) {
	_, base, clock, _ := limitsServer(t, nil)
	start := clock.Now()
	pay := `{"tool_name":"pay","agent_id":"agent-1"}`
	for i := range 10 {
		if d := evaluate(t, base, pay); d.Decision != engine.Allow {
			t.Fatalf("pay call %d: %+v, want allow", i+1, d.Result)
		}
	}
	d := evaluate(t, base, pay)
	if d.Decision != engine.Deny || d.MatchedRuleID != "pay-hourly" || d.Effect != engine.EffectDeny {
		t.Fatalf("the 11th pay call in the hour: %+v, want deny by pay-hourly", d.Result)
	}
	// Other tools and other agents have their own counts.
	if got := toolDecision(t, base, "Read"); got != "allow" {
		t.Errorf("Read after 10 pay calls: %s", got)
	}
	if d := evaluate(t, base, `{"tool_name":"pay","agent_id":"agent-2"}`); d.Decision != engine.Allow {
		t.Errorf("another agent's first pay call: %+v", d.Result)
	}
	// Denied calls are not counted: the calls fall out of the window an
	// hour after they were allowed, not after the denied ones.
	clock.set(start.Add(time.Hour - time.Nanosecond))
	if d := evaluate(t, base, pay); d.Decision != engine.Deny {
		t.Errorf("a nanosecond before the hour is over: %+v, want deny", d.Result)
	}
	clock.set(start.Add(time.Hour))
	if d := evaluate(t, base, pay); d.Decision != engine.Allow {
		t.Errorf("with the clock an hour on: %+v, want allow again", d.Result)
	}
}

func TestWarnedCallsCountAndAreReported(t *testing.T) {
	s, base, _, logs := limitsServer(t, nil)
	bash := `{"tool_name":"Bash","agent_id":"agent-1","session_id":"s1"}`
	for i := range 2 {
		d := evaluate(t, base, bash)
		if d.Decision != engine.Allow || d.Effect != engine.EffectWarn || len(d.Warnings) != 1 || d.Warnings[0] != "Bash is watched" {
			t.Fatalf("Bash call %d: %+v, want allow with effect warn and the rule's warning", i+1, d.Result)
		}
	}
	if d := evaluate(t, base, bash); d.Decision != engine.Deny || d.MatchedRuleID != "bash-twice" {
		t.Errorf("the third Bash call of the session: %+v, want deny by bash-twice (warned calls count)", d.Result)
	}
	if d := evaluate(t, base, strings.Replace(bash, "s1", "s2", 1)); d.Effect != engine.EffectWarn {
		t.Errorf("another session's Bash call: %+v, want warn", d.Result)
	}
	_ = s.Close(t.Context())
	lines := logs.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d decision log lines, want 4:\n%s", len(lines), logs)
	}
	for i, want := range []string{"warn", "warn", "deny", "warn"} {
		if lines[i]["effect"] != want {
			t.Errorf("line %d: effect %v, want %s: %v", i, lines[i]["effect"], want, lines[i])
		}
		warnings, _ := lines[i]["warnings"].([]any)
		if (want == "warn") != (len(warnings) == 1 && warnings[0] == "Bash is watched") {
			t.Errorf("line %d: warnings %v", i, lines[i]["warnings"])
		}
	}
	if got := metricValue(t, base, `toolgate_sidecar_decisions_total{code="",decision="allow",effect="warn"}`); got != 3 {
		t.Errorf("decisions_total{allow,warn} = %v, want 3", got)
	}
	if got := metricValue(t, base, `toolgate_sidecar_decisions_total{code="",decision="deny",effect="deny"}`); got != 1 {
		t.Errorf("decisions_total{deny,deny} = %v, want 1", got)
	}
}

func TestTokenBudgetCountsEveryToolsTokens(t *testing.T) {
	_, base, _, _ := limitsServer(t, nil)
	for _, tc := range []struct {
		body string
		want engine.Decision
	}{
		{`{"tool_name":"llm","agent_id":"t","tokens":60}`, engine.Allow},
		{`{"tool_name":"Read","agent_id":"t","tokens":40}`, engine.Allow}, // 100: not over
		{`{"tool_name":"Read","agent_id":"t","tokens":1}`, engine.Deny},   // 101
		{`{"tool_name":"Read","agent_id":"t"}`, engine.Allow},             // no tokens: still 100
		{`{"tool_name":"Read","agent_id":"u","tokens":100}`, engine.Allow},
	} {
		if d := evaluate(t, base, tc.body); d.Decision != tc.want {
			t.Errorf("%s: %+v, want %s", tc.body, d.Result, tc.want)
		}
	}
}

// TestUsageEvictionsAreCounted: an agent's session counters past its share
// (half of --usage-max-keys) are forgotten, counted while a limit's window
// still reaches their calls; its agent counter is not.
func TestUsageEvictionsAreCounted(t *testing.T) {
	_, base, _, _ := limitsServer(t, func(o *Options) { o.UsageMaxKeys = 8 })
	for i := range 6 {
		if d := evaluate(t, base, fmt.Sprintf(`{"tool_name":"pay","agent_id":"a","session_id":"s-%d"}`, i)); d.Decision != engine.Allow {
			t.Fatalf("pay %d: %+v", i, d.Result)
		}
	}
	if got := metricValue(t, base, "toolgate_sidecar_usage_evictions_total"); got != 2 {
		t.Errorf("usage_evictions_total = %v, want 2: six sessions, a share of four", got)
	}
	if got := metricValue(t, base, "toolgate_sidecar_usage_keys"); got != 5 {
		t.Errorf("usage_keys = %v, want 5: the agent's and four sessions'", got)
	}
}

// bindingBundle denies Bash in prod and pay to the ci role.
func bindingBundle() engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "binding", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "no-bash-in-prod", Effect: "deny", Targets: &engine.Targets{Tools: []string{"Bash"}},
			When: &engine.When{Environments: []string{"prod"}}},
		{ID: "ci-may-not-pay", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
			Subjects: &engine.Subjects{Roles: []string{"ci"}}},
	}}}}
}

func TestRolesAndEnvironmentAreBoundAndTheDifferenceLogged(t *testing.T) {
	o := testOptions()
	o.Roles, o.Environment = []string{"ci", "builder"}, "prod"
	logs := &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	s, base := newTestServer(t, o)
	doc, _ := encode(t, bindingBundle())
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		body                string
		rule                string
		requestedRoles, env any
	}{
		{`{"tool_name":"Bash","session_id":"s1","environment":"dev"}`, "no-bash-in-prod", nil, "dev"},
		{`{"tool_name":"Bash","session_id":"s2"}`, "no-bash-in-prod", nil, nil},
		{`{"tool_name":"pay","session_id":"s3","roles":["admin"]}`, "ci-may-not-pay", `["admin"]`, nil},
		{`{"tool_name":"pay","session_id":"s4","roles":["ci","builder"],"environment":"prod"}`, "ci-may-not-pay", nil, nil},
		{`{"tool_name":"pay","session_id":"s5","roles":["builder","ci"],"environment":7}`, "ci-may-not-pay", nil, "7"}, // a set: the same roles
		{`{"tool_name":"pay","session_id":"s6","roles":null}`, "ci-may-not-pay", "null", nil},
		{`{"tool_name":"pay","session_id":"s7","roles":["ci","ci"]}`, "ci-may-not-pay", `["ci","ci"]`, nil},
		{`{"tool_name":"pay","session_id":"s8","roles":["ci","builder",1]}`, "ci-may-not-pay", `["ci","builder",1]`, nil},
	}
	for _, tc := range cases {
		if d := evaluate(t, base, tc.body); d.Decision != engine.Deny || d.MatchedRuleID != tc.rule {
			t.Errorf("%s: %+v, want deny by %s", tc.body, d.Result, tc.rule)
		}
	}
	_ = s.Close(t.Context())
	lines := logs.lines(t)
	if len(lines) != len(cases) {
		t.Fatalf("%d log lines, want %d", len(lines), len(cases))
	}
	for i, tc := range cases {
		if got := lines[i]["requested_roles"]; got != tc.requestedRoles {
			t.Errorf("%s: requested_roles %v, want %v", tc.body, got, tc.requestedRoles)
		}
		if got := lines[i]["requested_environment"]; got != tc.env {
			t.Errorf("%s: requested_environment %v, want %v", tc.body, got, tc.env)
		}
	}
	for field, want := range map[string]float64{"roles": 4, "environment": 2} {
		if got := metricValue(t, base, fmt.Sprintf(`toolgate_sidecar_binding_overrides_total{field=%q}`, field)); got != want {
			t.Errorf("binding_overrides_total{field=%s} = %v, want %v", field, got, want)
		}
	}
}

// An empty --roles binds "no roles": a client can neither claim a role
// nor leave its roles unresolved (which a role-scoped deny treats as
// possibly holding it).
func TestEmptyRolesBindNoRoles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roles []string
		body  string
		want  engine.Decision
	}{
		{"unbound, claimed", nil, `{"tool_name":"pay","roles":["ci"]}`, engine.Deny},
		{"unbound, unresolved", nil, `{"tool_name":"pay"}`, engine.Deny},
		{"unbound, none", nil, `{"tool_name":"pay","roles":[]}`, engine.Allow},
		{"bound to none, claimed", []string{}, `{"tool_name":"pay","roles":["ci"]}`, engine.Allow},
		{"bound to none, unresolved", []string{}, `{"tool_name":"pay"}`, engine.Allow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			o.Roles = tc.roles
			s, base := newTestServer(t, o)
			doc, _ := encode(t, bindingBundle())
			if err := s.LoadDocument(doc, false); err != nil {
				t.Fatal(err)
			}
			if d := evaluate(t, base, tc.body); d.Decision != tc.want {
				t.Errorf("%s: %+v, want %s", tc.body, d.Result, tc.want)
			}
		})
	}
}

// Calls decided at once cannot pass a limit together: with a rate limit
// in the bundle, deciding and counting a call are one step.
func TestConcurrentCallsDoNotPassALimit(t *testing.T) {
	// A slow clock (read when a decision starts and when its call is
	// counted) holds every decision open long enough for the others to
	// overlap it.
	_, base, _, _ := limitsServer(t, func(o *Options) {
		o.MaxEvaluations = 100
		fixed := o.now
		o.now = func() time.Time {
			time.Sleep(2 * time.Millisecond)
			return fixed()
		}
	})
	const calls = 40
	var wg sync.WaitGroup
	decisions := make(chan engine.Decision, calls)
	for range calls {
		wg.Go(func() {
			status, data := post(t, base+"/v1/evaluate", `{"tool_name":"pay","agent_id":"agent-1"}`)
			if status != 200 {
				t.Errorf("status %d: %s", status, data)
				return
			}
			decisions <- decodeDecision(t, data).Decision
		})
	}
	wg.Wait()
	close(decisions)
	allowed := 0
	for d := range decisions {
		if d == engine.Allow {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of %d concurrent pay calls allowed, want exactly 10", allowed, calls)
	}
}
