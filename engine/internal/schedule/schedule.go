// Package schedule is when.schedule's windows: read from a policy (days,
// HH:MM from and to, an IANA zone) and tested against the time of a call.
package schedule

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/toolgate/toolgate/engine/diagnostic"
)

// Window is one compiled window: the days it starts on, from and to in
// seconds of the day (to before from crosses midnight), and its zone.
type Window struct {
	Days     uint8 // bit per time.Weekday
	From, To int32 // seconds of the day
	Loc      *time.Location
}

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

var hhmm = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

// Read reads one window of when.schedule (its days, HH:MM from and to,
// and IANA zone) as compiling a policy does, reporting each problem to
// fail at a location below at; ok is false when there was one.
func Read(fail func(at diagnostic.Location, format string, args ...any), at diagnostic.Location, days []string, from, to, zone string) (Window, bool) {
	ok := true
	out := Window{Loc: time.UTC}
	if days == nil {
		out.Days = 0x7f
	} else if len(days) == 0 {
		fail(at.Child("days"), "must not be empty (omit it for every day)")
		ok = false
	}
	for i, day := range days {
		wd, known := weekdays[day]
		if !known {
			fail(at.Child("days").Index(i), "unknown day %q (want mon, tue, wed, thu, fri, sat or sun)", day)
			ok = false
			continue
		}
		out.Days |= 1 << wd
	}
	clock := func(field, s string) int32 {
		if !hhmm.MatchString(s) {
			fail(at.Child(field), "%q is not a time of day as HH:MM (00:00 to 23:59)", s)
			ok = false
			return -1
		}
		return int32((int(s[0]-'0')*10+int(s[1]-'0'))*3600 + (int(s[3]-'0')*10+int(s[4]-'0'))*60)
	}
	out.From, out.To = clock("from", from), clock("to", to)
	if ok && out.From == out.To {
		fail(at.Child("to"), "from and to are both %s: the window is empty (a window crossing midnight has to before from)", from)
		ok = false
	}
	if zone != "" {
		loc, err := loadZone(zone)
		if err != nil {
			fail(at.Child("timeZone"), "unknown time zone %q (want an IANA name such as Europe/Berlin)", zone)
			ok = false
		}
		out.Loc = loc
	}
	return out, ok
}

// loadZone refuses names LoadLocation reads from the local filesystem or
// environment ("Local", paths), so a zone means the same everywhere.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("not an IANA zone")
	}
	return time.LoadLocation(name)
}

// HoldsAt tells whether now falls inside the window.
func (w *Window) HoldsAt(now time.Time) bool {
	t := now.In(w.Loc)
	h, m, sec := t.Clock()
	s := int32(h*3600 + m*60 + sec)
	day := t.Weekday()
	if w.From < w.To {
		return w.Days&(1<<day) != 0 && s >= w.From && s < w.To
	}
	prev := (day + 6) % 7
	return (w.Days&(1<<day) != 0 && s >= w.From) || (w.Days&(1<<prev) != 0 && s < w.To)
}
