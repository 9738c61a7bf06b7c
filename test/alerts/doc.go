// Package alerts tests the operator's alerting rules
// (config/prometheus/alerts.yaml) as Prometheus runs them: parsed as the
// Prometheus Operator hands them over, and evaluated by Prometheus's own
// rule engine on the series the operator's metrics code writes, scraped
// every 30 seconds on a simulated clock.
//
// A module of its own, as test/fetchbench is: Prometheus's engine and its
// storage stay out of the operator's go.mod.
package alerts
