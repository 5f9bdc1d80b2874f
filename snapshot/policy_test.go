package snapshot

import (
	"testing"
	"time"
)

func TestPolicyDue(t *testing.T) {
	tests := []struct {
		name      string
		p         Policy
		atoms     int
		sinceLast time.Duration
		want      bool
	}{
		{"defaults: nothing new", Policy{}, 0, time.Hour, false},
		{"defaults: negative atoms", Policy{}, -3, time.Hour, false},
		{"defaults: one short of count", Policy{}, 49, time.Minute, false},
		{"defaults: count reached", Policy{}, 50, 0, true},
		{"defaults: count passed", Policy{}, 51, 0, true},
		{"defaults: interval just short", Policy{}, 1, 10*time.Minute - 1, false},
		{"defaults: interval reached", Policy{}, 1, 10 * time.Minute, true},
		{"custom count", Policy{Every: 3}, 3, 0, true},
		{"custom count short", Policy{Every: 3}, 2, 0, false},
		{"custom interval", Policy{Interval: time.Second}, 1, time.Second, true},
		{"custom interval short", Policy{Interval: time.Second}, 1, time.Second - 1, false},
		{"count disabled, interval fires", Policy{Every: -1}, 1000, 10 * time.Minute, true},
		{"count disabled, interval not yet", Policy{Every: -1}, 1000, time.Minute, false},
		{"interval disabled, count fires", Policy{Interval: -1}, 50, 0, true},
		{"interval disabled, count not yet", Policy{Interval: -1}, 49, 1000 * time.Hour, false},
		{"both disabled", Policy{Every: -1, Interval: -1}, 1 << 30, 1000 * time.Hour, false},
		{"every 1", Policy{Every: 1}, 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Due(tt.atoms, tt.sinceLast); got != tt.want {
				t.Errorf("%+v.Due(%d, %v) = %v, want %v", tt.p, tt.atoms, tt.sinceLast, got, tt.want)
			}
		})
	}
}

func TestPolicyEffective(t *testing.T) {
	tests := []struct {
		p        Policy
		every    int
		interval time.Duration
	}{
		{Policy{}, DefaultEvery, DefaultInterval},
		{Policy{Every: 7, Interval: time.Second}, 7, time.Second},
		{Policy{Every: -1, Interval: -time.Second}, 0, 0},
	}
	for _, tt := range tests {
		every, interval := tt.p.Effective()
		if every != tt.every || interval != tt.interval {
			t.Errorf("%+v.Effective() = %d, %v; want %d, %v", tt.p, every, interval, tt.every, tt.interval)
		}
	}
}
