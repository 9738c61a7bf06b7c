package values

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/modelserver-dev/modelserver-operator/internal/servingflags"
)

// flagName is the form of a flag's name the CRD admits in spec.extraArgs.
var flagName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// operatorFlags are the flags the operator sets from the spec, by the
// field each comes from: an extra arg may not set them again, since the
// server would read only one of the two.
var operatorFlags = map[string]string{
	"port":                                "spec.ports",
	"rest_api_port":                       "spec.ports",
	"model_config_file":                   "spec.model or spec.models",
	"model_config_file_poll_wait_seconds": "spec.model or spec.models",
	"model_name":                          "spec.model or spec.models",
	"model_base_path":                     "spec.model or spec.models",
	"allow_version_labels_for_unavailable_models": "spec.model or spec.models",
	"enable_batching":          "spec.batching",
	"batching_parameters_file": "spec.batching",
	"monitoring_config_file":   "spec.monitoring",
	"ssl_config_file":          "spec.tls",
}

// checkExtraArgs refuses what the CRD refuses in spec.extraArgs, for a
// ModelServer admitted before it did, and what TF Serving would refuse
// at start: a value its flag's type cannot take, and the flags it will
// not take together (tls: spec.tls sets --ssl_config_file). A pod that
// cannot start would only roll out and stall; the spec is refused before
// anything is built.
func checkExtraArgs(args []string, tls bool) error {
	set := map[string]string{}
	for i, arg := range args {
		field := fmt.Sprintf("spec.extraArgs[%d]", i)
		name, value, hasValue, ok := servingflags.Split(arg)
		switch {
		case !ok || !flagName.MatchString(name):
			return &Error{field, badValue(arg, "not one tensorflow_model_server flag: write --name=value, or --name alone for a boolean")}
		case operatorFlags[name] != "":
			return &Error{field, fmt.Sprintf("--%s is set by the operator from %s", name, operatorFlags[name])}
		case name == "version" || name == "help":
			return &Error{field, fmt.Sprintf("--%s makes the server print and exit: it would never serve", name)}
		}
		f, known := servingflags.Lookup(name)
		if !known {
			continue
		}
		canonical, err := f.Value(value, hasValue)
		switch {
		case errors.Is(err, servingflags.ErrNeedsValue):
			return &Error{field, fmt.Sprintf("--%s takes a value, %s: write --%s=VALUE", name, kindPhrase(f.Kind), name)}
		case err != nil:
			return &Error{field, fmt.Sprintf("--%s takes %s, not %.100q: TF Serving would not start", name, kindPhrase(f.Kind), value)}
		}
		set[name] = canonical
	}
	if tls {
		set["ssl_config_file"] = "spec.tls"
	}
	return checkFlagsTogether(set)
}

// checkFlagsTogether refuses the flags TF Serving refuses to start with
// together; set holds each flag's last value, the one the server keeps,
// and --ssl_config_file where spec.tls sets it.
func checkFlagsTogether(set map[string]string) error {
	positive := func(name string) bool { v := set[name]; return v != "" && v != "0" && v[0] != '-' }
	if positive("tensorflow_session_parallelism") && positive("tensorflow_intra_op_parallelism") && positive("tensorflow_inter_op_parallelism") {
		return &Error{"spec.extraArgs", "set --tensorflow_session_parallelism, or --tensorflow_intra_op_parallelism and --tensorflow_inter_op_parallelism, not all three: TF Serving would not start"}
	}
	if set["use_alts_credentials"] == "true" && set["ssl_config_file"] != "" {
		return &Error{"spec.extraArgs", "--use_alts_credentials and spec.tls exclude each other: TF Serving would not start"}
	}
	return nil
}

func kindPhrase(k servingflags.Kind) string {
	switch k {
	case servingflags.Bool:
		return "true or false"
	case servingflags.Int32:
		return "a whole number (32 bits)"
	case servingflags.Int64:
		return "a whole number (64 bits)"
	case servingflags.Float:
		return "a number"
	}
	return "a string"
}

// extraArgWarnings name the extra args TF Serving would ignore: flags
// the server the operator knows does not have (a newer server may have
// them, so they are passed on), and a flag set again, whose earlier
// values the server drops for the last.
func extraArgWarnings(args []string) []string {
	var warnings []string
	first := map[string]int{}
	for i, arg := range args {
		name, _, _, _ := servingflags.Split(arg)
		if j, seen := first[name]; seen {
			warnings = append(warnings, fmt.Sprintf("spec.extraArgs[%d]: --%s is set again (first in spec.extraArgs[%d]); TF Serving keeps only the last value", i, name, j))
			continue
		}
		first[name] = i
		if _, known := servingflags.Lookup(name); !known {
			warnings = append(warnings, fmt.Sprintf("spec.extraArgs[%d]: tensorflow_model_server %s has no flag --%s; TF Serving ignores a flag it does not have", i, servingflags.Version, name))
		}
	}
	return warnings
}
