// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"strings"
	"testing"
)

func TestParseSortsTimelineAndChecksNames(t *testing.T) {
	s, err := Parse([]byte(`{"pods":[{"name":"web","qos":"burstable"}],
	  "containers":[{"name":"c","pod":"web","command":["sleep","1"]}],
	  "timeline":[{"at_ms":20,"op":"create_start","container":"c"},{"at_ms":0,"op":"run_pod","pod":"web"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Timeline[0].Op != "run_pod" || s.Timeline[1].Op != "create_start" {
		t.Fatalf("timeline not sorted: %+v", s.Timeline)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	for in, want := range map[string]string{
		`{"pods":[{"name":"p","qos":"gold"}]}`:                                      "qos",
		`{"pods":[{"name":"p"}],"containers":[{"name":"c","pod":"p"}]}`:             "no command",
		`{"pods":[{"name":"p"}],"containers":[{"name":"c","pod":"q","fake":true}]}`: "unknown pod",
		`{"timeline":[{"op":"start","container":"x"}]}`:                             "unknown container",
		`{"timeline":[{"op":"launch"}]}`:                                            "unknown op",
		`{"pods":[{"name":"p","colour":"red"}]}`:                                    "unknown field",
		`{"pods":[{"name":"../x"}]}`:                                                "pod name",
		`{"timeline":[{"op":"sleep","ms":-1}]}`:                                     "negative",
		`{"timeline":[{"op":"refuse_updates","count":-1}]}`:                         "negative count",
		`{"timeline":[{"op":"outage"}]}`:                                            "needs \"ms\"",
		`{"timeline":[{"op":"lose_replies","count":1,"message":"x"}]}`:              "only for refuse_updates",
		`{"timeline":[{"op":"state"}]}`:                                             "needs \"container\"",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}
