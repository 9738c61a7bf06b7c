// Package checks holds the tests of the committed install artifacts: that
// bundle/ passes the OLM validators, that catalog/ loads and resolves as
// OLM's catalog server does, that both and dist/install.yaml are what the
// generator makes from config/ (so that a change of config/, api/ or the
// CSV base without `make bundle catalog install-yaml` fails), and that they
// agree with the API's defaults and samples.
package checks
