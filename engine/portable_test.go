package engine

import (
	"slices"
	"testing"
	"time"
)

func TestSpanOfReadsWindowsAsCompileDoes(t *testing.T) {
	span, ok := SpanOf(Window{Days: []string{"fri", "mon"}, From: "22:30", To: "06:00", TimeZone: "Europe/Berlin"})
	if !ok || !slices.Equal(span.Days, []time.Weekday{time.Monday, time.Friday}) || span.From != 22*3600+30*60 || span.To != 6*3600 || span.Zone != "Europe/Berlin" {
		t.Errorf("got %+v, %v", span, ok)
	}
	every, ok := SpanOf(Window{From: "09:00", To: "17:00"})
	if !ok || len(every.Days) != 7 || every.Zone != "UTC" {
		t.Errorf("no days, no zone: got %+v, %v; want every day in UTC", every, ok)
	}
	for _, w := range []Window{{From: "9:00", To: "17:00"}, {Days: []string{"monday"}, From: "09:00", To: "17:00"}, {From: "09:00", To: "09:00"}, {From: "09:00", To: "17:00", TimeZone: "Local"}} {
		if _, ok := SpanOf(w); ok {
			t.Errorf("%+v reads as a window; compiling it fails", w)
		}
	}
}

func TestRuleRanks(t *testing.T) {
	rules := []Rule{
		{ID: "a", Effect: "allow", Priority: 10},
		{ID: "b", Effect: "deny", Priority: 10},
		{ID: "c", Effect: "warn", Priority: 20},
		{ID: "d", Effect: "allow", Priority: 10},
		{ID: "e", Effect: "audit", Priority: 10},
	}
	// c (20), then at 10: b (deny), e (audit), a, d (allows in index order).
	if got, want := RuleRanks(rules), []int{3, 1, 0, 4, 2}; !slices.Equal(got, want) {
		t.Errorf("ranks %v, want %v", got, want)
	}
}
