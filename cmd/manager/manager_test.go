package main

import (
	"strings"
	"testing"
)

func TestFlagsAfterAStrayArgumentAreRefusedNotIgnored(t *testing.T) {
	err := runManager([]string{"--kubeconfig=/nonexistent", "manager", "--metrics-bind-address=0"})
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "manager"`) {
		t.Fatalf("runManager with flags after a positional argument: %v, want it refused", err)
	}
}
