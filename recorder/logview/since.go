package logview

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSince reads a --since value: a duration back from now (90s, 15m, 2h, 3d,
// 1w, or Go's 1h30m), an RFC 3339 time, a date (2006-01-02, local midnight), a
// date and time (2006-01-02 15:04[:05] or with a T), or a time of day today
// (15:04[:05]).
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("--since: empty")
	}
	if n, unit, ok := cutNumber(s); ok && (unit == "d" || unit == "w") {
		days := n
		if unit == "w" {
			days *= 7
		}
		if days > 1e6 {
			return time.Time{}, fmt.Errorf("--since %q: too far back", s)
		}
		if days == float64(int(days)) {
			return now.AddDate(0, 0, -int(days)), nil // calendar days, across a DST change too
		}
		return now.Add(-time.Duration(days * 24 * float64(time.Hour))), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %q: want a duration back from now, without a sign", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"15:04", "15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			y, m, d := now.Date()
			return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), 0, now.Location()), nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration (90s, 15m, 2h, 3d, 1w), a date (2006-01-02), a time today (15:04) or an RFC 3339 time", s)
}

// cutNumber splits "3d" into 3 and "d".
func cutNumber(s string) (float64, string, bool) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return 0, "", false
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, s[i:], true
}
