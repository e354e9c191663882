package main

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	testenv.Slow(t)
	var out strings.Builder
	if err := run(context.Background(), "mem://", prometheus.NewRegistry(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	scrape := out.String()
	for _, want := range []string{
		"# TYPE lease_operation_duration_seconds histogram",
		`lease_operation_duration_seconds_count{lease_backend="memory",lease_operation="acquire",lease_outcome="acquired"} 2`,
		`lease_operation_duration_seconds_count{lease_backend="memory",lease_operation="acquire",lease_outcome="held"} 2`,
		`lease_operation_duration_seconds_count{lease_backend="memory",lease_operation="force_release",lease_outcome="released"} 1`,
		`lease_operation_duration_seconds_count{lease_backend="memory",lease_operation="release",lease_outcome="released"} 1`,
		"# TYPE lease_held gauge",
		`lease_held{lease_backend="memory"} 0`,
		"# TYPE lease_hold_duration_seconds histogram",
		`lease_hold_duration_seconds_count{lease_backend="memory",lease_outcome="released"} 1`,
		`lease_hold_duration_seconds_count{lease_backend="memory",lease_outcome="lost"} 1`,
		"# TYPE lease_renewal_slack_seconds histogram",
		"# TYPE lease_losses_total counter",
		`lease_losses_total{lease_backend="memory",lease_loss_cause="renew_lost"} 1`,
	} {
		if !strings.Contains(scrape, want+"\n") {
			t.Errorf("the scrape has no line %s\n%s", want, scrape)
		}
	}
	if !strings.Contains(scrape, `lease_operation_duration_seconds_count{lease_backend="memory",lease_operation="renew_batch",lease_outcome="renewed"}`) &&
		!strings.Contains(scrape, `lease_operation_duration_seconds_count{lease_backend="memory",lease_operation="renew_batch",lease_outcome="lost"}`) {
		t.Errorf("the scrape shows no renewal\n%s", scrape)
	}
}
